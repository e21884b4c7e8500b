"""Celery tasks of the notifications app (beat runs all three; see CELERY_BEAT_SCHEDULE).

All are idempotent: a redelivered message finds the mails it already sent in ``NotificationSent`` (inside the
rate limit, or once per job for the job-end summary) or the digest's period taken in ``StaffDigest``, and sends
nothing twice."""
from celery import shared_task
from django.utils.dateparse import parse_datetime

from apps.core.tasks import IDEMPOTENT, task_run_begin


def _when(now: str | None):
    """The optional ``now`` (ISO 8601, for tests and replays); a bad one is refused, never guessed."""
    if not now:
        return None
    parsed = parse_datetime(now)
    if parsed is None or parsed.tzinfo is None:
        raise ValueError(f"now must be an ISO 8601 time with its zone, not {now!r}")
    return parsed


def _tracked(task, name: str, subject: str, work, words, *, total: int | None = None) -> dict:
    """Run ``work(run)`` as the task run ``name`` (progress the pages show), then report ``words(outcome)``; a
    run already in progress elsewhere is skipped, a failure recorded on the run and raised."""
    run = task_run_begin(task, name, subject, "looking" if total is None else "writing", total=total)
    if run is None:
        return {"status": "skipped"}
    try:
        outcome = work(run)
    except Exception as exc:
        run.finish(error=str(exc)[:400])
        raise
    run.report(run.done or total or 0, words(outcome))
    run.finish()
    return outcome


def _mailing(run):
    return lambda done, total: run.report(done, "mailing", total=total)


@shared_task(name="notifications.notify_running_jobs", bind=True, **IDEMPOTENT)
def notify_running_jobs_task(self, now: str | None = None) -> dict:
    """Mail the users of opted-in projects' wasteful or straggling running jobs (beat, every NOTIFY_SECONDS)."""
    from .services import notify_running_jobs

    return _tracked(self, "notifications.notify_running_jobs", "running jobs of opted-in projects",
                    lambda run: notify_running_jobs(_when(now), progress=_mailing(run)),
                    lambda counts: (f"{counts['sent']} sent, {counts['skipped']} skipped, {counts['failed']} failed, "
                                    f"{counts['rate_limited']} within the rate limit, of {counts['jobs']} running jobs"))


@shared_task(name="notifications.staff_digest", bind=True, **IDEMPOTENT)
def staff_digest_task(self, now: str | None = None) -> dict:
    """The staff digest of the triage inbox (beat, every NOTIFY_STAFF_DIGEST_HOURS)."""
    from .services import staff_digest

    return _tracked(self, "notifications.staff_digest", "staff digest", lambda run: staff_digest(_when(now)),
                    lambda outcome: f"{outcome['status']}" + (f", {outcome['items']} items" if "items" in outcome else ""),
                    total=1)


@shared_task(name="notifications.notify_ended_jobs", bind=True, **IDEMPOTENT)
def notify_ended_jobs_task(self, now: str | None = None) -> dict:
    """Mail the users who asked for it a summary of each of their jobs that ended, once per job (beat, every
    NOTIFY_SECONDS). Idempotent: a job already summarised has its NotificationSent row and is not mailed again."""
    from .services import notify_ended_jobs

    return _tracked(self, "notifications.notify_ended_jobs", "ended jobs of users who asked for a summary",
                    lambda run: notify_ended_jobs(_when(now), progress=_mailing(run)),
                    lambda counts: (f"{counts['sent']} sent, {counts['skipped']} skipped, {counts['failed']} failed "
                                    f"of {counts['jobs']} ended jobs"))
