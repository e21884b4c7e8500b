"""Demo part: the saturation scores of the jobs people look at first.

The telemetry part (just before) writes the samples of the Megatron job, the two profile jobs and the
demo user's jobs and lists them in ``context.shared["telemetry_scored_jobs"]``; this part scores each
of them now, from scratch (beat scores the others later, and live refresh keeps the running ones up to date).
"""
from apps.core.demo import DemoContext, demo_part


def reset() -> None:
    """Nothing of its own: the scores go with the demo's jobs (the jobs part removes them)."""


@demo_part("saturation", order=65, reset=reset)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    from .services import job_saturation_refresh

    pks = context.shared.get("telemetry_scored_jobs") or []
    jobs = Job.objects.select_related("cluster").in_bulk(pks)
    for pk in pks:
        job_saturation_refresh(jobs[pk])
    return {"scored": len(pks)}
