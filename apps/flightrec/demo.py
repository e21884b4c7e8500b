"""Demo part: two Megatron-LM jobs that stopped on a collective, with their Flight Recorder dumps.

* ``gpt-13b-dp-hang`` (TIMEOUT, 16 nodes, TP 4 x PP 2 x DP 8): rank 37 never entered the last data-parallel
  all-reduce; its GPU (nid of rank 37, GPU 1) went idle while the others of its node ran, and XID 79 ("fallen off the
  bus") appears on it two minutes before the stop, in the telemetry;
* ``gpt-13b-after-refactor`` (FAILED): after a code change rank 12 all-reduces a tensor of half the size in its
  tensor-parallel group.

The dumps (``synthetic.megatron_dumps``, 200 entries per rank) go through the real service (checked, stored,
analysed), so the job page and the API show what a real job would. About a second to build.
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd

from apps.core.demo import DemoContext, demo_part
from apps.telemetry.backends.base import TelemetryUnavailable

from .synthetic import megatron_dumps

DEMO_CLUSTER = "alps"
NAMES = ("gpt-13b-dp-hang", "gpt-13b-after-refactor")
NODES, TP, PP, ENTRIES = 16, 4, 2, 200
HANG_CULPRIT, MISMATCH_CULPRIT = 37, 12
XID_FIELD, SM_ACTIVE = 230, 1002


def reset() -> None:
    from apps.jobs.models import Job

    Job.objects.filter(cluster__name=DEMO_CLUSTER, name__in=NAMES, source="demo").delete()


def _telemetry(job, nodes, host: str, gpu: int, stop, end) -> int:
    """The hang seen from the GPUs, every GPU of the job every 30 s from 30 minutes before ``stop`` (when the job
    stopped progressing) to ``end``: training (GR engine, SM, tensor and DRAM activity of a Megatron step); the culprit
    GPU idle for the 10 minutes before the stop among busy peers, with XID 79 two minutes before it; after the stop the
    peers spin in NCCL's kernels (GR engine busy, little SM work, no tensor work) until the job ends. Enough of DCGM's
    profiling fields for the job to be scored."""
    from apps.telemetry.store import telemetry_store

    training = {1001: 0.97, 1002: 0.82, 1004: 0.5, 1005: 0.35}
    spinning = {1001: 1.0, 1002: 0.12, 1004: 0.0, 1005: 0.02}
    idle = {1001: 0.0, 1002: 0.0, 1004: 0.0, 1005: 0.0}
    rows = []
    first = stop - timedelta(minutes=30)
    for second in range(0, int((end - first).total_seconds()), 30):
        ts = first + timedelta(seconds=second)
        before = (stop - ts).total_seconds()  # > 0 before the stop
        for node in nodes:
            for lane in range(4):
                if node == host and lane == gpu:
                    levels = idle if before <= 600 else training
                else:
                    levels = training if before > 0 else spinning
                for field, value in levels.items():
                    rows.append({"ts": ts, "cluster": DEMO_CLUSTER, "host": node, "gpu": lane,
                                 "uuid": f"GPU-{node}-{lane}", "field": field, "value": value})
        rows.append({"ts": ts, "cluster": DEMO_CLUSTER, "host": host, "gpu": gpu, "uuid": f"GPU-{host}-{gpu}",
                     "field": XID_FIELD, "value": 79.0 if before <= 120 else 0.0})
    frame = pd.DataFrame(rows)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    try:
        return telemetry_store().write(frame)
    except TelemetryUnavailable:
        return 0


@demo_part("flightrec", order=72, reset=reset, weight=2)
def build(context: DemoContext) -> dict:
    from apps.jobs.choices import JobStateChoices
    from apps.jobs.models import Cluster, Job, node_search_text
    from apps.ranks.services import layout_set
    from apps.topology.selectors import topology_index_current

    from .services import flight_dump_store, job_flight_analyse

    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    if cluster is None:
        return {}
    hostnames = topology_index_current().hostnames
    made = {}
    account = sorted((context.shared.get("memberships") or {}).get("demo") or ["a-llm01"])[0]  # one the demo login sees
    for offset, (name, kind, culprit, state) in enumerate(((NAMES[0], "never_entered", HANG_CULPRIT, JobStateChoices.TIMEOUT),
                                                           (NAMES[1], "mismatch", MISMATCH_CULPRIT, JobStateChoices.FAILED))):
        nodes = hostnames[2000 + offset * 64: 2000 + offset * 64 + NODES]
        # ended 50 h ago, before the hourly health exporter of the catalogue's story stopped (two days ago): its XID
        # sample is not the newest of the GPU error counters, which stay stale as that story says
        end = context.now - timedelta(hours=50 + 20 * offset)
        start = end - timedelta(hours=4)
        job_id = (Job.objects.filter(cluster=cluster).order_by("-job_id").values_list("job_id", flat=True).first() or 0) + 1
        job = Job.objects.create(
            cluster=cluster, job_id=job_id, name=name, user_name=context.teammate(account), account=account, partition="normal", qos="normal",
            state=state, submit_time=start - timedelta(minutes=5), start_time=start, end_time=end, time_limit_minutes=240 if kind == "never_entered" else 720,
            exit_code=0 if kind == "never_entered" else 1, node_list=nodes, node_search=node_search_text(nodes), nodes=",".join(nodes),
            node_count=NODES, tasks=NODES * 4, gpus=NODES * 4, environment="megatron-lm-core", source="demo",
            command="srun --environment=megatron-lm-core python pretrain_gpt.py --tensor-model-parallel-size 4 "
                    "--pipeline-model-parallel-size 2 --num-layers 40 --hidden-size 5120 --bf16")
        layout_set(job, {"tp": TP, "pp": PP, "num_layers": 40}, source="demo", submitted_by="demo")
        dump_end = int((end - timedelta(seconds=30)).timestamp() * 1e9)
        for rank, data in megatron_dumps(NODES * 4, ENTRIES, tp=TP, pp=PP, culprit=culprit, kind=kind, end_ns=dump_end):
            flight_dump_store(job, rank, data, "pickle")
        if kind == "never_entered":
            if _telemetry(job, nodes, nodes[culprit // 4], culprit % 4, end - timedelta(minutes=10, seconds=30), end):
                from apps.saturation.services import job_saturation_refresh
                from apps.telemetry.services import job_telemetry_refresh

                job_telemetry_refresh(job)  # its page has its GPUs' heatmap and a score, as a finished job should
                job_saturation_refresh(job)
        analysis = job_flight_analyse(job)
        made[name] = analysis.status
        context.say(f"flightrec: {name} ({DEMO_CLUSTER}/{job_id}): {analysis.body.get('verdict', '')}")
    return made
