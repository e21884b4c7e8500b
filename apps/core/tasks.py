"""Tasks every deployment needs (the readiness ping, beat's heartbeat, the stale-run sweeper) and
the delivery options every app's tasks share.

Delivery: a task whose rerun does no harm (see the idempotency tables in each app's README) is
declared with ``**IDEMPOTENT``: its message is acknowledged only after it ran (``acks_late``), and a
worker process killed mid-run (SIGKILL, the OOM killer) hands it back to the broker
(``reject_on_worker_lost``), so it runs again instead of being lost. :func:`task_run_begin` keeps a
redelivered message from completing twice and a message that keeps killing its worker from looping.
"""
import os
import socket
import time
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from .models import Heartbeat, TaskRun, TaskRunStatusChoices

#: Delivery options of every idempotent task.
IDEMPOTENT = {"acks_late": True, "reject_on_worker_lost": True}

#: A message whose runs were killed this many times is not run again (each kill leaves its
#: TaskRun "requeued"): a task that always takes its worker down must not loop for ever.
MAX_WORKER_LOSSES = 3


def stale_cutoff(now=None):
    """Work started (or last reporting progress) before this lost its worker and its message: longer ago
    than ``TASK_STALE_SECONDS``, more than any task may run and than the broker's redelivery. The sweepers of
    TaskRuns and of products being built share it."""
    return (now or timezone.now()) - timedelta(seconds=settings.TASK_STALE_SECONDS)


def task_run_begin(task, name: str, subject: str, message: str = "", total: int | None = None) -> TaskRun | None:
    """Record the start of one execution of ``task`` as a TaskRun tied to its message id.

    Returns None when this message must not run: it already completed once (a worker lost between
    the task's end and its acknowledgement redelivers a finished message), or earlier deliveries
    were killed ``MAX_WORKER_LOSSES`` times (the newest such run is then finished with that reason).
    An earlier run of the same message still "running" lost its worker: it becomes "requeued" (the broker's
    restore of a dead worker's messages, :func:`mark_runs_requeued`, usually did that already).
    """
    task_id = getattr(task.request, "id", None) or ""
    if task_id:
        earlier = TaskRun.objects.filter(celery_task_id=task_id, name=name)
        if earlier.filter(status=TaskRunStatusChoices.STATUS_SUCCEEDED).exists():
            return None
        for run in earlier.filter(status=TaskRunStatusChoices.STATUS_RUNNING):
            run.requeued("the worker running this was lost (killed mid-run); the message was delivered again")
        losses = earlier.filter(status=TaskRunStatusChoices.STATUS_REQUEUED).count()
        if losses >= MAX_WORKER_LOSSES:
            gave_up = TaskRun.objects.create(name=name, subject=subject, celery_task_id=task_id)
            gave_up.finish(error=f"not run again: its worker was killed {losses} times while running it")
            return None
    run = TaskRun.objects.create(name=name, subject=subject, celery_task_id=task_id)
    run.start(message, total=total)
    return run


def mark_runs_requeued(owner: str, messages: list[dict]) -> list[int]:
    """The broker put back the messages of a worker that died (portal/broker.py's ``on_restore``): the runs
    of those messages still "running" say so at once, instead of until the sweeper's TASK_STALE_SECONDS."""
    ids = [message["id"] for message in messages if message.get("id")]
    host, pid, _token = ([*owner.rsplit(".", 2), "", ""])[:3]  # host.pid.token (a host name may hold dots)
    now = timezone.now()
    marked = []
    for run in TaskRun.objects.filter(celery_task_id__in=ids,
                                      status__in=[TaskRunStatusChoices.STATUS_RUNNING, TaskRunStatusChoices.STATUS_PENDING]):
        run.requeued(f"its worker (pid {pid} on {host}) was lost mid-run; queued again at {now:%H:%M:%S} UTC")
        marked.append(run.pk)
    return marked


def hold_for_tests(name: str) -> None:
    """Test profile only: while ``$BELVEDERE_TEST_HOLD_DIR/<name>.hold`` exists, mark this process
    as started there and wait, so a test can kill a worker mid-task deterministically."""
    folder = os.environ.get("BELVEDERE_TEST_HOLD_DIR")
    if settings.BELVEDERE_PROFILE != "test" or not folder:
        return
    hold = Path(folder) / f"{name}.hold"
    if not hold.exists():
        return
    (Path(folder) / f"{name}.started.{os.getpid()}.{time.monotonic_ns()}").touch()
    deadline = time.monotonic() + 300
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@shared_task(name="core.ping", ignore_result=False, expires=60)
def ping_task(nonce: str) -> dict:
    """Answer /readyz's broker round-trip, saying which process answered.

    The caller compares ``pid``/``hostname`` with its own to prove a separate worker process
    took the message off the broker (an eager call would answer with the caller's own pid).
    Not acks_late: a lost ping is worth nothing once its caller gave up; it expires instead.
    """
    return {"nonce": nonce, "pid": os.getpid(), "hostname": socket.gethostname()}


@shared_task(name="core.beat_heartbeat", **IDEMPOTENT)
def beat_heartbeat_task() -> None:
    """Sent by beat on a fixed schedule; its arrival proves beat, broker and worker all run."""
    Heartbeat.beat("beat", worker_pid=os.getpid())


@shared_task(name="core.sweep_stale_runs", **IDEMPOTENT)
def sweep_stale_runs_task() -> list[int]:
    """Beat: end TaskRuns still "running" with no progress for ``TASK_STALE_SECONDS`` (longer than any
    task may run): their worker was lost and their message is gone. Each gets the reason."""
    cutoff = stale_cutoff()
    ended = []
    for run in TaskRun.objects.filter(status__in=[TaskRunStatusChoices.STATUS_RUNNING, TaskRunStatusChoices.STATUS_PENDING],
                                      modified__lt=cutoff):
        run.finish(error=f"no progress since {run.modified:%Y-%m-%d %H:%M:%S} UTC: its worker was lost; ended by the sweeper")
        ended.append(run.pk)
    return ended


@shared_task(name="core.refresh_job", bind=True, **IDEMPOTENT)
def refresh_job_task(self, job_pk: int, reason: str = "", force: bool = False) -> dict:
    """Bring every registered product of one job up to date (apps/core/refresh.py registers them, in order).

    Queued by :func:`apps.core.live.mark_jobs_dirty` with a countdown of ``JOB_REFRESH_DEBOUNCE_SECONDS``;
    at most one runs per job (a lock in the cache), batches that arrive meanwhile queue one follow-up, a
    refresher that raises is recorded in the TaskRun and the next one still runs. Idempotent: each refresher
    brings its product to the store's state, so a rerun changes nothing. ``force`` runs even when no batch
    marked the job (a refresh on request)."""
    from .live import run_refresh

    return run_refresh(self, job_pk, reason=reason, force=force)


@shared_task(name="core.feed_demo", **IDEMPOTENT)
def feed_demo_task() -> dict:
    """Beat, only with DEMO_FEEDER: one tick of the living demo (each app's registered demo feeder)."""
    from .demo import feed_demo

    return feed_demo()
