"""Celery tasks of the telemetry app: keep job data products fresh."""
from celery import shared_task
from django.conf import settings

from apps.core.models import TaskRun
from apps.core.tasks import IDEMPOTENT

from .backends.base import TelemetryUnavailable
from .choices import JobTelemetryStatusChoices as Status
from .models import JobTelemetry

#: The ingestion source of samples read from the nodes' DCGM host engines (as IngestBatch.source for posts).
LIVE_DCGM_SOURCE = "dcgm-live"


@shared_task(name="telemetry.materialize_job", bind=True, autoretry_for=(TelemetryUnavailable,),
             retry_backoff=30, retry_backoff_max=600, retry_jitter=True, max_retries=5, **IDEMPOTENT)
def materialize_job_task(self, job_pk: int) -> dict:
    """Build one job's whole telemetry cube (beat's safety net); progress in a TaskRun, state on the job's
    JobTelemetry. Holds the job's live-refresh lock (apps/core/live.py) while it runs, and skips the job when
    a live refresh holds it."""
    from apps.core.live import job_refresh_lock
    from apps.jobs.models import Job

    job = Job.objects.select_related("cluster").get(pk=job_pk)
    with job_refresh_lock(job_pk, getattr(self.request, "id", None)) as taken:
        if not taken:  # the live refresh of this job runs now: it brings the cube up to date
            return {"job": job_pk, "status": "skipped", "reason": "a live refresh of this job is running"}
        return _materialize(self, job)


def _materialize(self, job) -> dict:
    from .services import job_telemetry_refresh

    run = TaskRun.objects.create(name="telemetry.materialize_job", subject=f"job {job.cluster.name}/{job.job_id}")
    run.start("reading telemetry", total=100)
    try:
        record = job_telemetry_refresh(job, report=run.report)
    except TelemetryUnavailable as exc:
        message = f"telemetry store unavailable (attempt {self.request.retries + 1}): {exc}"
        record = JobTelemetry.objects.filter(job=job).first()
        if record is not None and record.has_product():
            # Keep showing the last product; say why it is not newer.
            record.message = f"showing the product of {record.materialized:%Y-%m-%d %H:%M} UTC; {message}"[:500]
            record.save(update_fields=["message", "updated"])
        else:
            JobTelemetry.objects.update_or_create(job=job, defaults={
                "status": Status.STATUS_FAILED if self.request.retries >= self.max_retries else Status.STATUS_RUNNING,
                "message": message[:500]})
        run.finish(error=str(exc)[:400])
        raise
    run.finish()
    return {"job": job.pk, "status": record.status, "samples": record.samples}


@shared_task(name="telemetry.materialize_recent_jobs", **IDEMPOTENT)
def materialize_recent_jobs_task() -> list[int]:
    """Beat, the safety net under the live refresh: rebuild the cube of every job whose product is stale
    (apps/jobs/products.py: running and older than TELEMETRY_REFRESH_SECONDS, or ended and not yet
    reaching its end)."""
    from apps.jobs.products import stale_products

    ids = stale_products(JobTelemetry)
    for job_pk in ids:
        materialize_job_task.delay(job_pk)
    return ids


# Not redelivered (acks early): a live sample is worth nothing late, and beat sends the next one
# within a minute; the message expires rather than pile up while no worker runs.
@shared_task(name="telemetry.read_dcgm_live", expires=60)
def read_dcgm_live_task(job_pk: int) -> dict:
    """Sample the DCGM host engines of a running job's nodes (when TELEMETRY_DCGM_PORT is set) and
    store what they say; nodes that cannot be read are listed in the TaskRun, the rest still count."""
    import pandas as pd

    from apps.jobs.models import Job

    from .fields import DEFAULT_FIELDS
    from .live import collector_module, read_host
    from .store import telemetry_store

    port = settings.TELEMETRY_DCGM_PORT
    if not port:
        return {"skipped": "TELEMETRY_DCGM_PORT is not set"}
    job = Job.objects.select_related("cluster").get(pk=job_pk)
    hosts = list(job.node_list or [])[: settings.TELEMETRY_DCGM_MAX_NODES]
    run = TaskRun.objects.create(name="telemetry.read_dcgm_live", subject=f"job {job.cluster.name}/{job.job_id}")
    run.start(f"reading DCGM on {len(hosts)} nodes", total=len(hosts))
    frames, failures = [], []
    for done, host in enumerate(hosts, start=1):
        try:
            frames.append(read_host(host, port, fields=DEFAULT_FIELDS, seconds=settings.TELEMETRY_DCGM_SECONDS,
                                    interval=1.0, cluster=job.cluster.name))
        except collector_module().Failure as exc:
            failures.append(f"{host}: {exc}")
        run.report(done, f"{host}: {'failed' if failures and failures[-1].startswith(host) else 'read'}")
    frame = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else None
    if frame is not None:
        telemetry_store().write(frame)
        from .backends.base import canonical
        from .services import samples_arrived

        samples_arrived(canonical(frame), LIVE_DCGM_SOURCE)
    error = "" if not failures or frame is not None else "; ".join(failures)[:400]
    if failures and frame is not None:
        run.report(len(hosts), f"{len(failures)} node(s) could not be read: " + "; ".join(failures)[:300])
    run.finish(error=error)
    return {"job": job_pk, "samples": 0 if frame is None else len(frame), "failed": failures}


@shared_task(name="telemetry.read_dcgm_live_running", **IDEMPOTENT)
def read_dcgm_live_running_task() -> list[int]:
    """Fan out one live DCGM read per running job (only when TELEMETRY_DCGM_PORT is set)."""
    from apps.jobs.models import Job, JobStateChoices

    if not settings.TELEMETRY_DCGM_PORT:
        return []
    ids = list(Job.objects.filter(state=JobStateChoices.RUNNING).exclude(node_list=[]).values_list("pk", flat=True)[:200])
    for job_pk in ids:
        read_dcgm_live_task.delay(job_pk)
    return ids



@shared_task(name="telemetry.expire", **IDEMPOTENT)
def expire_task() -> dict:
    """Beat, every TELEMETRY_RETENTION_SECONDS: the retention pass (``services.expire_telemetry``), progress in a
    TaskRun. Each partition goes in its own short transaction, so ingestion waits at most one DROP for the store."""
    from .services import expire_telemetry

    run = TaskRun.objects.create(name="telemetry.expire", subject="telemetry store")
    run.start("looking for partitions past their tier's retention")
    try:
        gone = expire_telemetry(report=lambda done, message="", total=None: run.report(done, message, total))
    except TelemetryUnavailable as exc:
        run.finish(error=str(exc)[:400])
        raise
    run.finish()
    return {"removed": [item.partition for item in gone]}
