"""Celery tasks of the saturation app: score running jobs periodically and finished jobs once, and
end scorings whose worker was lost.

Every task here is idempotent (see the README): ``score_job`` replaces the job's result in one save
at its end, so it is acknowledged late and handed back when its worker dies mid-run.
"""
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.core.tasks import IDEMPOTENT, hold_for_tests, task_run_begin
from apps.telemetry.backends.base import TelemetryUnavailable

from .models import JobSaturation, JobSaturationStatusChoices as Status


@shared_task(name="saturation.score_job", bind=True, autoretry_for=(TelemetryUnavailable,), retry_backoff=30,
             retry_backoff_max=600, retry_jitter=True, max_retries=5, **IDEMPOTENT)
def score_job_task(self, job_pk: int) -> dict:
    from apps.jobs.models import Job

    from .services import job_saturation_refresh, scoring_begin, scoring_failed

    job = Job.objects.select_related("cluster").get(pk=job_pk)
    subject = f"job {job.cluster.name}/{job.job_id}"
    run = task_run_begin(self, "saturation.score_job", subject, "scoring", total=100)
    if run is None:  # delivered again after it completed, or it keeps killing its worker
        record = JobSaturation.objects.filter(job=job).first()
        if record is not None and record.scoring_task == (self.request.id or ""):
            scoring_failed(job, "its worker was killed each time it ran", final=True)
        return {"job": job_pk, "status": "skipped"}
    scoring_begin(job, self.request.id or "")
    hold_for_tests("saturation.score_job")
    try:
        record = job_saturation_refresh(job, report=run.report, task_id=self.request.id or "")
    except TelemetryUnavailable as exc:
        final = self.request.retries >= self.max_retries
        scoring_failed(job, f"telemetry store unavailable (attempt {self.request.retries + 1}"
                            f"{'' if final else ', will retry'}): {exc}", final=final)
        run.finish(error=str(exc)[:400])
        raise
    except ValueError as exc:  # unusable samples: say so on the job, do not retry
        scoring_failed(job, str(exc), final=True)
        run.finish(error=str(exc)[:400])
        return {"job": job_pk, "status": "failed"}
    run.finish()
    return {"job": job_pk, "status": record.status, "score": record.score}


@shared_task(name="saturation.score_recent_jobs", **IDEMPOTENT)
def score_recent_jobs_task() -> list[int]:
    """Running jobs whose score is older than SATURATION_REFRESH_SECONDS, and finished jobs once
    after their end."""
    from apps.jobs.models import Job

    now = timezone.now()
    stale = now - timedelta(seconds=settings.SATURATION_REFRESH_SECONDS)
    recent = now - timedelta(hours=settings.TELEMETRY_RECENT_HOURS)
    computed = dict(JobSaturation.objects.filter(computed__isnull=False).values_list("job_id", "computed"))
    ends = dict(JobSaturation.objects.filter(window_end__isnull=False).values_list("job_id", "window_end"))
    scoring = set(JobSaturation.objects.filter(scoring_since__isnull=False).values_list("job_id", flat=True))
    ids = []
    for pk, end_time in (Job.objects.filter(Q(state="RUNNING") | Q(end_time__gte=recent)).exclude(start_time=None)
                         .order_by("-start_time").values_list("pk", "end_time")[:1000]):
        made = computed.get(pk)
        if pk in scoring:  # one scoring at a time; the sweeper ends one whose worker was lost
            continue
        if end_time is None and made and made >= stale:
            continue
        if end_time is not None and made and ends.get(pk) and ends[pk] >= end_time:
            continue
        ids.append(pk)
    for job_pk in ids:
        score_job_task.delay(job_pk)
    return ids


@shared_task(name="saturation.sweep_stale_scoring", **IDEMPOTENT)
def sweep_stale_scoring_task(queue: str | None = None) -> list[int]:
    """Beat: a scoring that started more than TASK_STALE_SECONDS ago (longer than any task may run,
    and than the broker's redelivery) lost its worker and its message: end it with that reason,
    keeping the previous score, and queue the job again (to ``queue`` when given, else the task's
    route). Rows left "running" by older versions too."""
    cutoff = timezone.now() - timedelta(seconds=settings.TASK_STALE_SECONDS)
    ids = []
    for record in JobSaturation.objects.filter(Q(scoring_since__lt=cutoff) | Q(status=Status.STATUS_RUNNING)):
        since = record.scoring_since
        if record.status == Status.STATUS_RUNNING:
            record.status = Status.STATUS_WAITING
            record.save(update_fields=["status"])
        reason = (f"the scoring started {since:%Y-%m-%d %H:%M} UTC never finished (its worker was lost); queued again"
                  if since else "a scoring left unfinished by an earlier version; queued again")
        from .services import scoring_failed

        scoring_failed(record.job, reason, final=False)
        score_job_task.apply_async(args=[record.job_id], **({"queue": queue} if queue else {}))
        ids.append(record.job_id)
    return ids
