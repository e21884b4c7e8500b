"""Saturation of a whole-machine-scale job: 4,096 GPUs (1,024 GH200 nodes), 3 hours at 10 s.

1. The heatmap API (``GET .../saturation/heatmap/?metric=S&bins=300&sort=pp``) through Django's test
   client — authentication, the job's row, the product file, time rebinning, row order, JSON. Its floor
   is loading the same metric from the same product file.
2. Full scoring of that job by the worker's service (``job_saturation_refresh``): node-chunked reads of
   bucket means from the embedded store, per-sample scores, steady state, per-GPU summaries, the product,
   straggler detection with the job's Megatron layout on the reference topology, and the database row.
   Its floor is fetching the same samples from the store into numpy arrays (the least any Python
   scoring must do), next to a bare scan (count and sum of every column) for scale.

The synthetic job is the demo's Megatron profile (planted throttled GPU, hot GPU, slow-NIC node), so
the figure also says whether the stragglers were found at this size.
"""
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np

from bench.common import Figure, median_seconds

NODES, HOURS = 1024, 3


def run(workdir: Path) -> list[Figure]:
    import duckdb
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.ranks.models import JobLayout
    from apps.saturation.products import SaturationCube
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import default_planted, job_chunks

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    hosts = [f"nid{n:06d}" for n in range(1, NODES + 1)]
    end = timezone.now().replace(microsecond=0)
    start = end - timedelta(hours=HOURS)
    user = get_user_model().objects.create_user("bench-user", password="bench-password-1")
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=4096, user_name=user.username, account="bench", state="COMPLETED",
                             submit_time=start, start_time=start, end_time=end, node_list=hosts, node_count=NODES, gpus=4 * NODES)
    JobLayout.objects.create(job=job, tp=4, pp=8, dp=4 * NODES // 32, world_size=4 * NODES, tasks_per_node=4, source="sizes")
    store = telemetry_store()
    samples = 0
    for chunk in job_chunks("megatron", hosts, start, HOURS * 3600, seed=11, elapsed_before_s=3600, hosts_per_chunk=64):
        samples += store.write(chunk)

    figures = []
    seconds = median_seconds(lambda: job_saturation_refresh(job), repeats=1)
    connection = duckdb.connect(str(store.file), read_only=True)
    lo, hi = int(start.timestamp() * 1e9), int(end.timestamp() * 1e9)
    scan = median_seconds(lambda: connection.execute(
        "SELECT count(*), sum(value), sum(ts), sum(series), sum(field) FROM samples WHERE ts >= ? AND ts < ?", [lo, hi]).fetchall(),
        repeats=3)
    floor = median_seconds(lambda: connection.execute(
        "SELECT series, field, ts, value FROM samples WHERE ts >= ? AND ts < ?", [lo, hi]).fetchnumpy(), repeats=1)
    connection.close()
    job.refresh_from_db()
    record = job.saturation
    planted = default_planted(hosts)
    found = {(s["level"], s["host"], s["gpu"]) for s in record.stragglers}
    expected = {("gpu", *planted.throttled), ("gpu", *planted.hot), ("node", planted.slow_nic, None)}
    figures.append(Figure(f"score a {4 * NODES:,}-GPU, {HOURS} h, 10 s job (worker)", seconds, floor,
                          f"fetching the same {samples:,} samples into numpy (bare scan {scan:.2f} s)",
                          f"score {record.score}, {len(record.per_gpu):,} GPUs at {record.step_seconds} s; stragglers "
                          f"{'all 3 planted found' if found == expected else f'found {sorted(map(str, found))}'}"))
    print(f"  scored in {seconds:.1f} s (fetch {floor:.2f} s, bare scan {scan:.2f} s)", file=sys.stderr)

    client = Client(HTTP_HOST="127.0.0.1")  # the embedded profile serves 127.0.0.1 and localhost
    client.force_login(user)
    url = f"/api/v1/jobs/alps/{job.job_id}/saturation/heatmap/?metric=S&bins=300&sort=pp"
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    seconds = median_seconds(lambda: client.get(url), repeats=5)
    path = Path(settings.DATA_DIR) / record.product
    floor = median_seconds(lambda: SaturationCube.load(path, ["S"]), repeats=5)
    values = np.array([[np.nan if v is None else v for v in row] for row in body["values"]])
    figures.append(Figure(f"heatmap API {len(body['rows']):,} GPUs x {len(body['times'])} bins", seconds, floor,
                          "loading the same metric from the product file",
                          f"sorted by pp stage, {len(response.content) / 1e6:.1f} MB JSON, {np.isfinite(values).mean():.0%} cells "
                          "with data; target <= 0.3 s"))
    return figures
