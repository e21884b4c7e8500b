"""Demo part (issue 39): the host side of the GH200 nodes — a job whose GPUs wait on their data loaders, and a node
whose GPU 1 holds page cache.

* **The data-loader-bound job** (``LOADER_NAME``, the demo researcher's): 2 nodes that no demo job used that day,
  90 minutes ending ``LOADER_ENDED_H`` hours before the build, a quarter of its time in stalls where its data-loader
  workers run at 100 % of their CPUs and the GPUs idle, two checkpoints in between (``host_synthetic.data_loader_job``):
  its page says "GPUs wait on the host: during the ... % of iterations that ran slow ..." and its throughput figure has
  a host row. Its first node's GPU 1 holds 23 GB of page cache in GPU memory before and during the job.
* **The feeder** keeps that node's host fields coming (every 10 s of the span: CPU, memory, the GPUs' page cache), so
  its own history (``/nodes/<host>/``) reaches to now.

Small on purpose (about 60,000 samples, a second to build). Fixed choices, no draw from the shared generator.
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part
from apps.telemetry.backends.base import TelemetryUnavailable

from .host_synthetic import GIB, data_loader_job

DEMO_CLUSTER = "alps"
LOADER_ID = 1_290_039
LOADER_NAME = "apertus-8b-sft-tokenize-on-the-fly"
LOADER_ENDED_H, LOADER_MINUTES = 3, 90
PAGE_CACHE_BYTES = 23e9
FEED_INTERVAL = 10


def reset() -> None:
    from apps.jobs.models import Job

    Job.objects.filter(cluster__name=DEMO_CLUSTER, cluster__title__startswith="[demo]", job_id=LOADER_ID).delete()


def _node_rows(host: str, stamps) -> pd.DataFrame:
    """The page-cache node's own host fields at ``stamps`` (no job on it now: quiet CPUs, 23 GB in GPU 1)."""
    rows = []
    for ts in stamps:
        rows += [(ts, "node", "host_cpu_busy", 0.03), (ts, "node", "host_mem_used", 40.0 * GIB),
                 (ts, "node", "host_mem_total", 480.0 * GIB), (ts, "node", "host_page_cache", 61.0 * GIB)]
        rows += [(ts, f"gpu{gpu}", "host_gpu_page_cache", PAGE_CACHE_BYTES if gpu == 1 else 0.3 * GIB) for gpu in range(4)]
    return pd.DataFrame([{"ts": t, "cluster": DEMO_CLUSTER, "host": host, "domain": d, "field": f, "value": v}
                         for t, d, f, v in rows])


@demo_part("hosts", order=71, reset=reset, weight=1)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Cluster
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.services import job_telemetry_refresh
    from apps.telemetry.store import telemetry_store

    from .demo import _create, _free_by_group

    try:
        store = telemetry_store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  hosts        skipped: {exc}")
        return {}
    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    if cluster is None:
        return {}
    end = (context.now - timedelta(hours=LOADER_ENDED_H)).replace(second=0, microsecond=0)
    start = end - timedelta(minutes=LOADER_MINUTES)
    free = _free_by_group(cluster, start - timedelta(hours=1), context.now)
    group = next((g for g in sorted(free, key=lambda g: (g is None, g)) if g is not None and g != 17 and len(free[g]) >= 2),
                 None)
    if group is None:
        context.say("  hosts        skipped: no two free nodes")
        return {}
    nodes = free[group][:2]
    memberships = context.shared.get("memberships") or {}
    account = sorted(memberships.get("demo") or ["a-llm01"])[0]
    job = _create(cluster, LOADER_ID, LOADER_NAME, "demo", account, nodes, start,
                  "srun --environment=ngc-pytorch-25.01 python finetune.py --num-workers 2 --tokenize-on-the-fly")
    job.state, job.end_time, job.exit_code = "COMPLETED", end, 0
    job.save(update_fields=["state", "end_time", "exit_code"])
    job.steps.update(state="COMPLETED", end_time=end)
    data = data_loader_job(nodes, LOADER_ID, start, LOADER_MINUTES * 60, stall_share=0.25, checkpoint_every_s=1600,
                           page_cache_gpu={(nodes[0], 1): PAGE_CACHE_BYTES}, seed=context.seed)
    samples = store.write(data["gpu"])
    before = pd.date_range(start - timedelta(minutes=30), start, freq="5min", tz="UTC", inclusive="left")
    hosts = store.write_host(pd.concat([_node_rows(nodes[0], before), data["host"]], ignore_index=True))
    after = pd.date_range(end, context.now, freq="5min", tz="UTC")
    hosts += store.write_host(_node_rows(nodes[0], after))
    points = store.write_job_series(data["app"])
    job_telemetry_refresh(job)
    job_saturation_refresh(job)
    context.feed_memory["host_page_cache_node"] = nodes[0]
    context.say(f"  hosts        {LOADER_NAME} on {nodes[0]}, {nodes[1]}: data-loader stalls, "
                f"23 GB of page cache in {nodes[0]} GPU 1")
    return {"loader_job": LOADER_ID, "page_cache_node": nodes[0], "host_samples": hosts, "gpu_samples": samples,
            "points": points}


@demo_feeder("hosts", order=71)
def feed(context: FeedContext) -> dict:
    """The page-cache node's host fields every 10 s of the span (the grid: feeding a span again writes nothing new)."""
    from apps.telemetry.store import telemetry_store

    host = (context.memory or {}).get("host_page_cache_node")
    if not host:
        return {"skipped": "no page-cache node in this demo"}
    stamps = [pd.Timestamp(moment) for moment in context.grid(FEED_INTERVAL)]
    if not stamps:
        return {"samples": 0}
    try:
        return {"samples": telemetry_store().write_host(_node_rows(host, stamps))}
    except TelemetryUnavailable as exc:
        return {"skipped": f"telemetry store unavailable: {exc}"}
