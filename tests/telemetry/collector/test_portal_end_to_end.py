"""The collector, wrapped around a job in real processes, posts to the real portal with the job's
token; the samples land in the telemetry store with DCGM ids and units."""
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from apps.telemetry.backends.base import Query
from apps.telemetry.hostfields import HOST_FIELD_NAMES

RUNNER = Path(__file__).with_name("recording.py")
MIB = 1024 * 1024


def test_collector_to_portal_to_store(live_server, transactional_db, store, tmp_path):
    from apps.jobs.models import Cluster, Job, JobToken
    from apps.telemetry.models import IngestBatch

    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4242, user_name="alice", account="a",
                             state="RUNNING", submit_time=timezone.now() - timedelta(minutes=5),
                             start_time=timezone.now() - timedelta(minutes=1), node_list=["nid000001"])
    _, key = JobToken.issue(job)
    token = tmp_path / "job.token"
    token.write_text(key + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "BELVEDERE_"))}
    env.update({"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "nid000001",
                "SLURM_STEP_GPUS": "0,1", "BELVEDERE_JOB_TOKEN_FILE": str(token),
                "BELVEDERE_JOB_URL": f"{live_server.url}/jobs/alps/4242/"})
    result = subprocess.run([sys.executable, str(RUNNER), "--source", "gpm", "--interval", "0.1", "--batch-seconds", "0.3",
                             "--fields", "1002,1009,155", "--", sys.executable, "-c", "import time; time.sleep(0.8)"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = store.read(Query(start=timezone.now() - timedelta(hours=1), end=timezone.now() + timedelta(minutes=1)))
    assert len(data) > 0 and set(data["host"]) == {"nid000001"} and set(data["cluster"]) == {"alps"}
    assert set(data["gpu"]) == {0, 1}
    by_field = data.groupby("field")["value"].first().to_dict()
    assert by_field == {155: 215.5, 1002: 0.625, 1009: 2048.0 * MIB}
    # this machine's own /proc: the host fields (--host-metrics auto) pass ingestion beside the GPU samples
    host = store.read_net("alps", hosts="nid000001", fields=list(HOST_FIELD_NAMES))
    assert {"host_mem_used", "host_page_cache"} <= set(host["field"]) and "node" in set(host["nic"])
    batches = IngestBatch.objects.filter(sender="job alps/4242")
    assert batches.exists() and all(b.rejected == 0 for b in batches)
    assert sum(b.accepted for b in batches) == len(data) + len(host)
    assert "sent" in result.stderr
