"""Celery tasks of the saturation app: score running jobs periodically and finished jobs once."""
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.core.models import TaskRun
from apps.telemetry.backends.base import TelemetryUnavailable

from .models import JobSaturation, JobSaturationStatusChoices as Status


@shared_task(name="saturation.score_job", bind=True, autoretry_for=(TelemetryUnavailable,), retry_backoff=30,
             retry_backoff_max=600, retry_jitter=True, max_retries=5)
def score_job_task(self, job_pk: int) -> dict:
    from apps.jobs.models import Job

    from .services import job_saturation_refresh

    job = Job.objects.select_related("cluster").get(pk=job_pk)
    run = TaskRun.objects.create(name="saturation.score_job", subject=f"job {job.cluster.name}/{job.job_id}")
    run.start("scoring", total=100)
    try:
        record = job_saturation_refresh(job, report=run.report)
    except TelemetryUnavailable as exc:
        JobSaturation.objects.update_or_create(job=job, defaults={
            "status": Status.STATUS_FAILED if self.request.retries >= self.max_retries else Status.STATUS_RUNNING,
            "message": f"telemetry store unavailable (attempt {self.request.retries + 1}): {exc}"[:500]})
        run.finish(error=str(exc)[:400])
        raise
    except ValueError as exc:  # unusable samples: say so on the job, do not retry
        JobSaturation.objects.update_or_create(job=job, defaults={"status": Status.STATUS_FAILED, "message": str(exc)[:500]})
        run.finish(error=str(exc)[:400])
        return {"job": job_pk, "status": "failed"}
    run.finish()
    return {"job": job_pk, "status": record.status, "score": record.score}


@shared_task(name="saturation.score_recent_jobs")
def score_recent_jobs_task() -> list[int]:
    """Running jobs whose score is older than SATURATION_REFRESH_SECONDS, and finished jobs once
    after their end."""
    from apps.jobs.models import Job

    now = timezone.now()
    stale = now - timedelta(seconds=settings.SATURATION_REFRESH_SECONDS)
    recent = now - timedelta(hours=settings.TELEMETRY_RECENT_HOURS)
    computed = dict(JobSaturation.objects.filter(computed__isnull=False).values_list("job_id", "computed"))
    ends = dict(JobSaturation.objects.filter(window_end__isnull=False).values_list("job_id", "window_end"))
    ids = []
    for pk, end_time in (Job.objects.filter(Q(state="RUNNING") | Q(end_time__gte=recent)).exclude(start_time=None)
                         .order_by("-start_time").values_list("pk", "end_time")[:1000]):
        made = computed.get(pk)
        if end_time is None and made and made >= stale:
            continue
        if end_time is not None and made and ends.get(pk) and ends[pk] >= end_time:
            continue
        ids.append(pk)
    for job_pk in ids:
        score_job_task.delay(job_pk)
    return ids
