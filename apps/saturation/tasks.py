"""Celery tasks of the saturation app: bring running jobs up to date (``update_job``, incremental),
score finished jobs once (``score_job``), score large jobs from scratch in node blocks (a chord of
``score_block`` tasks and ``merge_blocks``), and end scorings whose worker was lost.

Every task here is idempotent (see the README): ``score_job``, ``update_job`` and ``merge_blocks``
replace the job's result in one save at their end, a block whose file exists is done, so they are
acknowledged late and handed back when their worker dies mid-run.
"""
import os
import time
import uuid
from datetime import timedelta

from celery import chord, shared_task
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from apps.core.models import TaskRun, TaskRunStatusChoices
from apps.core.tasks import IDEMPOTENT, MAX_WORKER_LOSSES, hold_for_tests, stale_cutoff, task_run_begin
from apps.telemetry.backends.base import TelemetryUnavailable

from .choices import JobSaturationStatusChoices as Status
from .models import JobSaturation


def _scoring(task, job, run, score):
    """``score(job, report, task_id)`` inside a scoring task: a store that is down is retried (the previous
    result stays, with the reason); unusable samples end it as failed on the job, without retry (None)."""
    from .services import scoring_failed

    try:
        return score(job, report=run.report, task_id=task.request.id or "")
    except TelemetryUnavailable as exc:
        final = task.request.retries >= task.max_retries
        scoring_failed(job, f"telemetry store unavailable (attempt {task.request.retries + 1}"
                            f"{'' if final else ', will retry'}): {exc}", final=final)
        run.finish(error=str(exc)[:400])
        raise
    except ValueError as exc:  # unusable samples: say so on the job, do not retry
        scoring_failed(job, str(exc), final=True)
        run.finish(error=str(exc)[:400])
        return None


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
    from .services import split_wanted

    if split_wanted(job):  # large: node blocks on every free worker process
        scoring_id = start_split_scoring(job, reason="scored from scratch")
        run.report(100, f"handed to a scoring in node blocks ({scoring_id})" if scoring_id
                   else "a scoring in node blocks already runs")
        run.finish()
        return {"job": job_pk, "status": "split" if scoring_id else "skipped", "scoring": scoring_id}
    scoring_begin(job, self.request.id or "")
    hold_for_tests("saturation.score_job")
    record = _scoring(self, job, run, job_saturation_refresh)
    if record is None:
        return {"job": job_pk, "status": "failed"}
    run.finish()
    return {"job": job_pk, "status": record.status, "score": record.score}


@shared_task(name="saturation.update_job", bind=True, autoretry_for=(TelemetryUnavailable,), retry_backoff=30,
             retry_backoff_max=600, retry_jitter=True, max_retries=5, **IDEMPOTENT)
def update_job_task(self, job_pk: int) -> dict:
    """Bring one job's product up to date incrementally (``job_saturation_update``: from scratch only when
    its rules say so). One at a time per job, as ``score_job``: it marks the job as being scored."""
    from apps.jobs.models import Job

    from .services import job_saturation_update, scoring_begin, scoring_failed, split_in_flight

    job = Job.objects.select_related("cluster").get(pk=job_pk)
    run = task_run_begin(self, "saturation.update_job", f"job {job.cluster.name}/{job.job_id}", "updating", total=100)
    if run is None:
        record = JobSaturation.objects.filter(job=job).first()
        if record is not None and record.scoring_task == (self.request.id or ""):
            scoring_failed(job, "its worker was killed each time it ran", final=True)
        return {"job": job_pk, "status": "skipped"}
    record = JobSaturation.objects.filter(job=job).first()
    if record is not None and split_in_flight(record):
        run.finish()
        return {"job": job_pk, "status": "skipped", "why": "a scoring in node blocks runs"}
    scoring_begin(job, self.request.id or "")
    hold_for_tests("saturation.update_job")
    record = _scoring(self, job, run, job_saturation_update)
    if record is None:
        return {"job": job_pk, "status": "failed"}
    run.finish()
    return {"job": job_pk, "status": record.status, "score": record.score,
            "mode": getattr(record, "last_read", {}).get("mode", "split" if split_in_flight(record) else "")}


# ---------------------------------------------------------------------------------------------
# Scoring from scratch in node blocks: a chord of score_block tasks and merge_blocks


def start_split_scoring(job, *, reason: str = "", block_nodes: int | None = None, scoring_id: str | None = None) -> str | None:
    """Score the job from scratch as one ``saturation.score_block`` task per block of
    ``SATURATION_BLOCK_NODES`` nodes (any free worker process takes one) and ``saturation.merge_blocks``
    once all are done, which puts them together exactly as one task would. Progress goes to a TaskRun
    ``saturation.score_blocks``; the job is marked as being scored (``scoring_task`` ``split:<id>``) until
    the merge. Returns the scoring id, or None when such a scoring already runs or the job has not started."""
    from .services import SPLIT_PREFIX, split_plan

    record, _ = JobSaturation.objects.get_or_create(job=job)
    scoring_id = scoring_id or uuid.uuid4().hex[:16]
    claimed = (JobSaturation.objects.filter(pk=record.pk).exclude(scoring_task__startswith=SPLIT_PREFIX, scoring_since__isnull=False)
               .update(scoring_since=timezone.now(), scoring_task=f"{SPLIT_PREFIX}{scoring_id}"))
    if not claimed:
        return None
    subject = f"job {job.cluster.name}/{job.job_id}"
    run = TaskRun.objects.create(name="saturation.score_blocks", subject=subject, celery_task_id=f"{SPLIT_PREFIX}{scoring_id}")
    plan = split_plan(job, scoring_id, block_nodes=block_nodes, run_pk=run.pk)
    if plan is None:
        run.finish(error="the job has not started on any node yet")
        JobSaturation.objects.filter(pk=record.pk, scoring_task=f"{SPLIT_PREFIX}{scoring_id}").update(scoring_since=None,
                                                                                                    scoring_task="")
        return None
    run.start(f"scoring {len(plan['hosts']):,} nodes from scratch in {plan['blocks']} blocks of {plan['block_nodes']}"
              + (f" ({reason})" if reason else ""), total=plan["blocks"] + 1)
    header = [score_block_task.si(job.pk, block, scoring_id) for block in range(plan["blocks"])]
    merge = merge_blocks_task.s(job.pk, scoring_id).on_error(split_failed_task.s(job_pk=job.pk, scoring_id=scoring_id))
    chord(header)(merge)
    return scoring_id


def _split_run(plan: dict | None) -> TaskRun | None:
    return TaskRun.objects.filter(pk=plan.get("run")).first() if plan and plan.get("run") else None


@shared_task(name="saturation.score_block", bind=True, autoretry_for=(TelemetryUnavailable,), retry_backoff=10,
             retry_backoff_max=300, retry_jitter=True, max_retries=5, **IDEMPOTENT)
def score_block_task(self, job_pk: int, block: int, scoring_id: str) -> dict:
    """One node block of a split scoring: its full-resolution scores into a file of the scoring's folder.
    Idempotent (a block whose file exists is done); a block that killed its worker MAX_WORKER_LOSSES times
    fails, and with it the chord (``split_failed``)."""
    from apps.jobs.models import Job

    from .services import read_plan, score_block, split_folder

    job = Job.objects.select_related("cluster").filter(pk=job_pk).first()
    if job is None:
        return {"block": block, "status": "no job"}
    folder = split_folder(job, scoring_id)
    marks = list(folder.glob(f"block-{block:04d}.running.*"))  # left by runs that never got to their end
    if len(marks) >= MAX_WORKER_LOSSES and not (folder / f"block-{block:04d}.npz").exists():
        raise RuntimeError(f"node block {block} killed its worker {len(marks)} times")
    mark = folder / f"block-{block:04d}.running.{os.getpid()}.{time.monotonic_ns()}"
    if folder.exists():
        mark.touch()
    hold_for_tests("saturation.score_block")
    try:
        result = score_block(job, scoring_id, block)
    finally:
        mark.unlink(missing_ok=True)
    plan = read_plan(job, scoring_id)
    if plan and plan.get("run") and result["status"] == "scored":
        TaskRun.objects.filter(pk=plan["run"]).update(done=F("done") + 1, modified=timezone.now(),
                                                      message=f"block {block + 1} of {plan['blocks']} scored")
    return result


@shared_task(name="saturation.merge_blocks", bind=True, **IDEMPOTENT)
def merge_blocks_task(self, results: list, job_pk: int, scoring_id: str) -> dict:
    """The chord's end: the blocks in node order, summarised, binned, stragglers found, saved."""
    from apps.jobs.models import Job

    from .services import SPLIT_PREFIX, merge_blocks, read_plan, split_folder

    job = Job.objects.select_related("cluster").filter(pk=job_pk).first()
    if job is None:
        return {"job": job_pk, "status": "no job"}
    run = _split_run(read_plan(job, scoring_id))
    report = (lambda done, message: run.report(run.total - 1 if run.total else done, message)) if run else (lambda d, m: None)
    try:
        record = merge_blocks(job, scoring_id, report=report)
    except ValueError as exc:  # unusable samples: say so on the job, do not retry
        from .services import scoring_failed

        scoring_failed(job, str(exc), final=True)
        import shutil

        shutil.rmtree(split_folder(job, scoring_id), ignore_errors=True)
        if run:
            run.finish(error=str(exc)[:400])
        return {"job": job_pk, "status": "failed"}
    if record is None:  # merged before: a message delivered again
        JobSaturation.objects.filter(job=job, scoring_task=f"{SPLIT_PREFIX}{scoring_id}").update(scoring_since=None, scoring_task="")
        return {"job": job_pk, "status": "skipped"}
    if run:
        run.finish()
    return {"job": job_pk, "status": record.status, "score": record.score, "blocks": len(results or [])}


@shared_task(name="saturation.split_failed", **IDEMPOTENT)
def split_failed_task(request, exc, traceback, job_pk: int, scoring_id: str) -> None:
    """Errback of the chord: a block failed for good. The job keeps its previous score with the reason
    (the beat's next round scores it again); the blocks are removed."""
    import shutil

    from apps.jobs.models import Job

    from .services import SPLIT_PREFIX, read_plan, scoring_failed, split_folder

    job = Job.objects.select_related("cluster").filter(pk=job_pk).first()
    if job is None:
        return
    run = _split_run(read_plan(job, scoring_id))
    reason = f"a node block of the split scoring failed: {exc}"[:400]
    if JobSaturation.objects.filter(job=job, scoring_task=f"{SPLIT_PREFIX}{scoring_id}").exists():
        scoring_failed(job, reason, final=False)
    shutil.rmtree(split_folder(job, scoring_id), ignore_errors=True)
    if run and run.status == TaskRunStatusChoices.STATUS_RUNNING:
        run.finish(error=reason)


@shared_task(name="saturation.score_recent_jobs", **IDEMPOTENT)
def score_recent_jobs_task() -> list[int]:
    """Beat, the safety net under the live refresh: running jobs whose score is older than
    SATURATION_REFRESH_SECONDS are brought up to date (``update_job``, incremental), finished jobs are
    scored from scratch once after their end (``score_job``)."""
    from apps.jobs.products import stale_products
    from apps.jobs.models import Job

    now = timezone.now()
    recent = now - timedelta(hours=settings.TELEMETRY_RECENT_HOURS)
    ids = stale_products(JobSaturation, now=now)  # one scoring at a time: those being scored are left out
    from .services import prune_states

    prune_states(ended_before=recent, stale_before=stale_cutoff(now))
    running = set(Job.objects.filter(pk__in=ids, end_time__isnull=True).values_list("pk", flat=True))
    for job_pk in ids:
        (update_job_task if job_pk in running else score_job_task).delay(job_pk)
    return ids


@shared_task(name="saturation.sweep_stale_scoring", **IDEMPOTENT)
def sweep_stale_scoring_task(queue: str | None = None) -> list[int]:
    """Beat: a scoring that started more than TASK_STALE_SECONDS ago (longer than any task may run,
    and than the broker's redelivery) lost its worker and its message: end it with that reason,
    keeping the previous score, and queue the job again (to ``queue`` when given, else the task's
    route). Rows left "running" by older versions too."""
    cutoff = stale_cutoff()
    ids = []
    for record in JobSaturation.objects.filter(Q(scoring_since__lt=cutoff) | Q(status=Status.STATUS_RUNNING)):
        since = record.scoring_since
        if record.status == Status.STATUS_RUNNING:
            record.status = Status.STATUS_WAITING
            record.save(update_fields=["status"])
        reason = (f"the scoring started {since:%Y-%m-%d %H:%M} UTC never finished (its worker was lost); queued again"
                  if since else "a scoring left unfinished by an earlier version; queued again")
        from .services import SPLIT_PREFIX, scoring_failed, split_folder

        if record.scoring_task.startswith(SPLIT_PREFIX):  # its blocks will not be merged: remove them
            import shutil

            shutil.rmtree(split_folder(record.job, record.scoring_task[len(SPLIT_PREFIX):]), ignore_errors=True)
        scoring_failed(record.job, reason, final=False)
        score_job_task.apply_async(args=[record.job_id], **({"queue": queue} if queue else {}))
        ids.append(record.job_id)
    return ids
