"""deploy/slurm/belvedere-preflight.sh as the Prolog of a real Slurm 22.05 cluster (issue 38, acceptance 2).

One cluster of two nodes (tests/slurm_cluster.py), the Prolog reads GPUs through a probe that plants a low
allocatable share on nid000002 (the probe is the script's BELVEDERE_PREFLIGHT_NVIDIA_SMI; there is no GPU here),
posts to pytest-django's live server. In ``report`` mode the job runs and the node's failure is recorded as a
vetting result; in ``enforce`` mode the node is drained with its reason, the job goes back to the queue, and the
portal refuses to resume a node it did not drain.
"""
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from apps.telemetry.models import VersionFact
from apps.vetting.models import VettingResult, VettingRun
from apps.vetting.scontrol import ActionRefused, SlurmNodeActions

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PREFLIGHT = REPO / "deploy" / "slurm" / "belvedere-preflight.sh"
# Two H100s per node; nid000002's GPU 1 keeps 30 GiB of file cache: 62 % allocatable.
PROBE = """#!/bin/sh
echo "0, 81559, 81000, 560.35.03, 96.00.89.00.01, G520.0200.00.05, 16549220${SLURMD_NODENAME#nid}0"
case $SLURMD_NODENAME in
  nid000002) echo "1, 81559, 50559, 560.35.03, 96.00.89.00.01, G520.0200.00.05, 16549220${SLURMD_NODENAME#nid}1" ;;
  *) echo "1, 81559, 80900, 560.35.03, 96.00.89.00.01, G520.0200.00.05, 16549220${SLURMD_NODENAME#nid}1" ;;
esac
"""


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return predicate()


def test_the_preflight_under_slurm_reports_then_enforces_a_low_allocatable_share(live_server, make_user, request, monkeypatch):
    from rest_framework.authtoken.models import Token

    from tests.slurm_cluster import LocalSlurmCluster

    reason = LocalSlurmCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    workdir = Path(tempfile.mkdtemp(prefix="belvedere-preflight-"))  # munged wants every directory above searchable
    workdir.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))
    (workdir / "jobs.token").write_text(Token.objects.create(user=make_user("svc", is_staff=True)).key + "\n")
    (workdir / "jobs.token").chmod(0o600)
    probe = workdir / "nvidia-smi"
    probe.write_text(PROBE)
    probe.chmod(0o755)

    def settings(mode):
        (workdir / "jobs.env").write_text(
            f"BELVEDERE_URL={live_server.url}\nBELVEDERE_TOKEN_FILE={workdir / 'jobs.token'}\nBELVEDERE_TIMEOUT=20\n"
            f"BELVEDERE_LOG_STDERR=1\nBELVEDERE_PREFLIGHT={mode}\nBELVEDERE_PREFLIGHT_NVIDIA_SMI={probe}\n")

    settings("report")
    hook = workdir / "prolog.sh"
    hook.write_text(f"#!/bin/sh\nBELVEDERE_JOBS_CONFIG={workdir / 'jobs.env'} exec {PREFLIGHT} 2>>{workdir / 'prolog.log'}\n")
    hook.chmod(0o755)
    cluster = LocalSlurmCluster(workdir / "slurm", cluster_name="preflight", nodes=2, prolog=hook)
    request.addfinalizer(cluster.stop)
    cluster.start()
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)  # the portal's scontrol talks to this cluster

    def logs():
        log = workdir / "prolog.log"
        return (log.read_text() if log.exists() else "") + cluster.log_tails(10)

    # report: the job runs; the low share is recorded, nothing is drained.
    job_id = cluster.sbatch("#!/bin/sh\nsrun -N2 -n2 true\n", "-N2", "-n2", "--time=2", cwd=workdir)
    cluster.wait_for_state(job_id, "COMPLETED", timeout=60)
    assert wait_for(lambda: VettingResult.objects.filter(run__source="preflight", job_id_number=job_id).count() == 4, 20), logs()
    memory = {r.host: r for r in VettingResult.objects.filter(job_id_number=job_id, eval_name="preflight_gpu_memory")}
    assert (memory["nid000001"].outcome, memory["nid000002"].outcome) == ("pass", "critical")
    assert memory["nid000002"].message == "GPU 1: 61 % of 81559 MiB allocatable (at least 90 % required)"
    assert VersionFact.objects.filter(host="nid000002", key="driver", value="560.35.03", source="preflight").exists()
    assert not cluster.node_states()["nid000002"].startswith("drain")

    # enforce: the failing node is drained with its reason and the job waits for other nodes.
    settings("enforce")
    job_id = cluster.sbatch("#!/bin/sh\nsrun -N2 -n2 true\n", "-N2", "-n2", "--time=2", cwd=workdir)
    try:
        assert wait_for(lambda: cluster.node_states()["nid000002"].startswith("drain"), 60), logs()
        info = SlurmNodeActions(_run, dry_run=False).info("nid000002")
        assert info.drained and info.reason.startswith("Belvedere pre-flight: GPU memory: GPU 1: 61 % of 81559 MiB"), info
        assert wait_for(lambda: set(cluster.job_states(job_id)) & {"PENDING", "REQUEUED", "REQUEUE_HOLD"}, 30), \
            cluster.job_states(job_id)
        assert not cluster.node_states()["nid000001"].startswith("drain")
        with pytest.raises(ActionRefused, match="not by Belvedere"):
            SlurmNodeActions(_run, dry_run=False).resume("nid000002")  # the portal never resumes it
    finally:
        cluster.run("scancel", str(job_id))
        cluster.run("scontrol", "update", "NodeName=nid000002", "State=RESUME")


def _run(args, timeout):
    from apps.jobs.services import run_slurm_command

    return run_slurm_command(args, timeout)


def test_the_job_page_and_its_first_screen_api_say_which_nodes_passed_the_preflight(job, make_user, client, api_client):
    """Two pre-flight runs posted as the script posts them: nid001234 passed, nid001235 had 61 % allocatable."""
    import json

    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=make_user("svc", is_staff=True)).key
    for host, code, message in (("nid001234", 0, "all 4 GPUs have at least 90 % of their memory allocatable"),
                                ("nid001235", 2, "GPU 1: 61 % of 81559 MiB allocatable (at least 90 % required)")):
        body = {"source": "preflight", "job_id": job.job_id, "cluster": "alps", "results": [
            {"hostname": host, "check": "preflight_gpu_memory", "exit_code": code, "message": message,
             "metrics": {"versions": [{"key": "driver", "value": "560.35.03"}]}},
            {"hostname": host, "check": "preflight_versions", "exit_code": 3, "message": "no expected set"}]}
        response = api_client.post("/api/v1/vetting/runs/", json.dumps(body), content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Token {key}")
        assert response.status_code in (200, 201), response.content
    client.force_login(make_user("alice"))
    first = client.get("/api/v1/jobs/alps/4242/first-screen/").json()
    assert first["preflight"]["passed"] == ["nid001234"] and [f["host"] for f in first["preflight"]["failed"]] == ["nid001235"]
    (fact,) = [f for f in first["facts"] if f["label"] == "Pre-flight"]
    assert (fact["value"], fact["detail"], fact["level"]) == ("1 of 2 nodes passed", "failed: nid001235", "warning")
    assert any(f["title"].startswith("nid001235 failed the pre-flight: GPU 1: 61 %") for f in first["findings"])
    page = client.get("/jobs/alps/4242/").content.decode()
    assert "Pre-flight in the prolog: 1 of 2 nodes passed" in page
    assert VersionFact.objects.filter(host="nid001235", key="driver", source="preflight").exists()
