"""Demo part: the saturation scores of the jobs people look at first.

The telemetry part (just before) writes the samples of the Megatron job, the two profile jobs and the
demo user's jobs and lists them in ``context.shared["telemetry_scored_jobs"]``; this part scores each
of them now, from scratch (beat scores the others later, and live refresh keeps the running ones up to date).

Its feeder (``saturation``, after the telemetry feeder) hands live refresh a few running jobs that have
no score yet each tick (``FIRST_SCORES_PER_TICK``), so the system page, the triage inbox and the reports
cover every running job within minutes of ``make run`` instead of after beat's first sweep
(SATURATION_REFRESH_SECONDS, 10 minutes); a job the timeline starts gets its first score the same way.
"""
from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part

FIRST_SCORES_PER_TICK = 8


def reset() -> None:
    """Nothing of its own: the scores go with the demo's jobs (the jobs part removes them)."""


@demo_part("saturation", order=65, reset=reset, weight=15)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    from .services import job_saturation_refresh

    pks = context.shared.get("telemetry_scored_jobs") or []
    jobs = Job.objects.select_related("cluster").in_bulk(pks)
    for pk in pks:
        job_saturation_refresh(jobs[pk])
    return {"scored": len(pks)}


@demo_feeder("saturation", order=65)
def feed(context: FeedContext) -> dict:
    """A few of the running jobs the telemetry feeder fed this tick that were never scored: to live refresh."""
    from apps.core.live import mark_jobs_dirty
    from apps.jobs.models import Job

    fed = context.shared.get("telemetry_jobs") or []
    unscored = list(Job.objects.filter(pk__in=fed, state="RUNNING").exclude(saturation__computed__isnull=False)
                    .order_by("-gpus", "job_id").values_list("pk", flat=True)[:FIRST_SCORES_PER_TICK])
    if unscored:
        mark_jobs_dirty(unscored, "demo feeder: first score")
    return {"first_scores": len(unscored)}
