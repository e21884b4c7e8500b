"""The campaigns app's part of the demo: a training campaign of 14 chained allocations over four days
(``--dependency=singleton``, found by detection as in production) with a node failure, an NCCL timeout, a time limit
without a final checkpoint and a restart from an older checkpoint, each allocation with its application metrics
(iterations, loss, tokens/s, checkpoint and restore markers). Small: a few hundred rows per job, no telemetry."""
from __future__ import annotations

from datetime import timedelta

from apps.core.demo import DemoContext, demo_part

DEMO_CLUSTER = "alps"
DEMO_USER = "demo"
NAME = "apertus-70b-demo"
FIRST_ID = 1_180_000  # below the history's job ids
NODES = 16
GPUS = NODES * 4
ROW_H = 0.1  # a metrics row every 6 min
STEPS_PER_ROW = 40
CHECKPOINT_EVERY_H = 0.7  # 42 min
CHECKPOINT_S = 90.0
RESTORE_S = 300.0
# (hours allocated, queue before it in hours, end state, what happens): "ok" ends by design (TIMEOUT after its final
# checkpoint, the last one COMPLETED), "node" loses a node, "nccl" hangs 35 min then aborts, "timeout" reaches its
# limit without a final checkpoint, "older": resumes from the checkpoint before the newest (the newest was damaged).
PLAN = [(6, 0, "ok"), (6, 1.5, "ok"), (6, 0.5, "ok"), (3.4, 0.7, "node"), (6, 2.0, "ok"), (6, 0.5, "ok"),
        (4.2, 1.0, "nccl"), (6, 3.0, "ok"), (6, 0.4, "ok"), (6, 0.6, "timeout"), (6, 1.2, "older"), (6, 0.5, "ok"),
        (6, 2.5, "ok"), (5, 0.5, "last")]


def reset() -> None:
    from apps.jobs.models import Job

    from .models import Campaign

    Campaign.objects.filter(name=NAME).delete()
    Job.objects.filter(cluster__name=DEMO_CLUSTER, job_id__gte=FIRST_ID, job_id__lt=FIRST_ID + len(PLAN)).delete()


def _hostlist(nodes) -> str:
    import hostlist

    return hostlist.collect_hostlist(list(nodes))


@demo_part("campaigns", order=76, reset=reset, weight=2)
def build(context: DemoContext) -> dict:
    from apps.appmetrics.services import metrics_ingest
    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import jobs_upsert
    from apps.jobs.slurm_json import SlurmJob

    from .services import campaigns_detect

    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    hostnames = sorted(context.shared.get("hostnames") or [])
    if cluster is None or len(hostnames) < NODES * 4:
        return {}
    account = sorted((context.shared.get("memberships") or {}).get(DEMO_USER) or ["a-llm01"])[0]
    owner = context.teammate(account)
    total = sum(hours + queue for hours, queue, _ in PLAN)
    start = (context.now - timedelta(hours=total + 2)).replace(second=0, microsecond=0)
    records, metrics = [], {}
    step, done = 0, []  # the iteration reached; completed checkpoints (steps)
    for index, (hours, queue, what) in enumerate(PLAN):
        start += timedelta(hours=queue)
        end = start + timedelta(hours=hours)
        nodes = hostnames[(index % 4) * NODES * 2: (index % 4) * NODES * 2 + NODES]
        resume = done[-2] if what == "older" and len(done) > 1 else (done[-1] if done else 0)
        rows = []
        if index:
            rows.append({"ts": (start + timedelta(minutes=4)).timestamp(), "step": resume, "event.restore": RESTORE_S})
        first_h = 0.3 if not index else 0.2
        silence = 35 / 60 if what == "nccl" else 0.05
        last_h = hours - silence - (0.1 if what in ("ok", "last", "older") else 0.0)
        step = resume
        k, next_checkpoint = 0, first_h + CHECKPOINT_EVERY_H
        while first_h + ROW_H * k <= last_h + 1e-9:
            at = first_h + ROW_H * k
            step += STEPS_PER_ROW
            tokens = 1.52e6 * (1.0 - 0.35 * (index == 5 and 2.0 <= at <= 2.6))  # a slow stretch in job 6: a dip
            rows.append({"ts": (start + timedelta(hours=at)).timestamp(), "step": step, "tokens_per_s": tokens,
                         "iteration_s": 4 * 1024 * 1024 / 1.52e6, "loss": round(1.9 + 6.0 / (1.0 + step / 1500.0) ** 0.6, 4)})
            if at + 1e-9 >= next_checkpoint:
                rows.append({"ts": (start + timedelta(hours=at)).timestamp(), "step": step, "event.checkpoint": CHECKPOINT_S})
                done.append(step)
                next_checkpoint += CHECKPOINT_EVERY_H
            k += 1
        if what in ("ok", "last", "older"):  # the final checkpoint at the end of the allocation
            rows.append({"ts": (start + timedelta(hours=last_h + 0.01)).timestamp(), "step": step, "event.checkpoint": CHECKPOINT_S})
            done.append(step)
        state, code, reason = {"ok": ("TIMEOUT", 0, "TimeLimit"), "last": ("COMPLETED", 0, ""),
                               "node": ("NODE_FAIL", None, f"NodeFail {nodes[5]}"), "nccl": ("FAILED", 134, ""),
                               "timeout": ("TIMEOUT", 0, "TimeLimit"), "older": ("TIMEOUT", 0, "TimeLimit")}[what]
        job_id = FIRST_ID + index
        records.append(SlurmJob(
            cluster=DEMO_CLUSTER, job_id=job_id, state=state, name=NAME, user=owner, account=account, partition="normal",
            qos="normal", state_reason=reason, submit_time=start - timedelta(hours=queue + 0.1), start_time=start, end_time=end,
            time_limit_minutes=int(hours * 60) if state == "TIMEOUT" else 360, nodes=_hostlist(nodes), node_list=tuple(nodes),
            node_count=NODES, tasks=GPUS, gpus=GPUS, exit_code=code, dependency="singleton",
            command="sbatch --dependency=singleton --environment=megatron-lm-core apertus-70b.sbatch",
            working_directory=f"/capstor/scratch/cscs/{owner}/apertus-70b"))
        metrics[job_id] = rows
        start = end
    jobs_upsert(cluster, records, source="demo")
    written = 0
    for job in Job.objects.select_related("cluster").filter(cluster=cluster, job_id__in=list(metrics)):
        written += metrics_ingest(job, metrics[job.job_id])
    report = campaigns_detect(cluster)
    context.say(f"  campaigns    {NAME}: {len(PLAN)} chained allocations over {total / 24:.1f} days ({written:,} metric "
                f"points); a node failure, an NCCL timeout, a time limit without a final checkpoint, a restart from an "
                f"older checkpoint")
    return {"campaign_jobs": len(PLAN), "campaign_points": written, **report.as_dict()}
