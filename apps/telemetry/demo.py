"""Demo part: synthetic GPU telemetry for three demo jobs, scored, and their job pages ready to show it.

* the running 128-node Megatron job: its last three hours at 10 s (``DEMO_TELEMETRY_HOURS``), with a power-throttled GPU (the
  straggler), a hot GPU and a node with a degraded NIC planted (see ``synthetic_jobs``);
* a finished multi-node job that is memory-bound;
* a finished job that left three of every four GPUs idle.
"""
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from apps.core.demo import DemoContext, demo_part

from .backends.base import Query, TelemetryUnavailable
from .synthetic_jobs import default_planted, job_chunks, window_of_run

DEMO_CLUSTER = "alps"


def _store():
    from .store import telemetry_store

    return telemetry_store()


def reset() -> None:
    try:
        _store().delete(Query(start=timezone.now() - timedelta(days=60), end=timezone.now() + timedelta(days=1), cluster=DEMO_CLUSTER))
    except TelemetryUnavailable:
        pass  # nothing to remove from a store that is not there


def _finished_jobs(exclude: set[int]):
    """Finished demo jobs of 2-16 nodes that ran 40 minutes to 4 hours, oldest user first (stable)."""
    from apps.jobs.models import Job

    return (Job.objects.filter(cluster__name=DEMO_CLUSTER, state="COMPLETED", node_count__gte=2, node_count__lte=16,
                               end_time__gte=F("start_time") + timedelta(minutes=40),
                               end_time__lte=F("start_time") + timedelta(hours=4))
            .exclude(pk__in=exclude).order_by("user_name", "job_id"))


@demo_part("telemetry", order=60, reset=reset)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    from .services import job_telemetry_refresh

    key = context.shared.get("megatron_job")
    if not key:
        return {}
    try:
        store = _store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  telemetry    skipped: {exc}")
        return {}
    now = timezone.now().replace(microsecond=0)
    megatron = Job.objects.get(cluster__name=key[0], job_id=key[1])
    start, duration, before = window_of_run(megatron.start_time, now, hours=settings.DEMO_TELEMETRY_HOURS)
    planted = default_planted(list(megatron.node_list))
    samples = 0
    for chunk in job_chunks("megatron", list(megatron.node_list), start, duration, seed=context.seed, planted=planted,
                            elapsed_before_s=before, cluster=DEMO_CLUSTER):
        samples += store.write(chunk)
    jobs = [megatron]
    used = {megatron.pk}
    for profile in ("memory_bound", "idle_gpus"):
        job = _finished_jobs(used).first()
        if job is None:
            continue
        used.add(job.pk)
        duration = min((job.end_time - job.start_time).total_seconds(), 3600 * min(2.0, settings.DEMO_TELEMETRY_HOURS))
        for chunk in job_chunks(profile, list(job.node_list), job.start_time, duration, seed=context.seed + len(used),
                                cluster=DEMO_CLUSTER):
            samples += store.write(chunk)
        jobs.append(job)
        context.shared[f"telemetry_{profile}_job"] = (job.cluster.name, job.job_id)
    from apps.saturation.services import job_saturation_refresh

    for job in jobs:
        job_telemetry_refresh(job)
        job_saturation_refresh(job)
    context.shared["telemetry_planted"] = planted.as_dict()
    return {"samples": samples, "jobs": len(jobs)}
