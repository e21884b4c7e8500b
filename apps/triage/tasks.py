"""Celery tasks of the triage app."""
from celery import shared_task

from apps.core.tasks import IDEMPOTENT, task_run_begin


@shared_task(name="triage.sync_inbox", bind=True, **IDEMPOTENT)
def sync_inbox_task(self) -> dict:
    """Rebuild the staff triage inbox from its sources (beat, every TRIAGE_SYNC_SECONDS; "refresh now").
    Idempotent: an upsert by key."""
    from .services import triage_sync

    run = task_run_begin(self, "triage.sync_inbox", "staff triage inbox", "reading the sources", total=1)
    if run is None:
        return {"status": "already done"}
    try:
        counts = triage_sync()
    except Exception as exc:
        run.finish(error=str(exc)[:400])
        raise
    run.report(1, f"{counts['found']} open at source: {counts['created']} new, {counts['resolved']} resolved, "
                  f"{counts['reopened']} reopened")
    run.finish()
    return counts
