"""Live refresh of job products: ingestion marks jobs dirty, one debounced task per job brings every
registered product (:mod:`apps.core.refresh`) up to date.

Three keys per job in the ``default`` cache (Redis in production, a file cache in the embedded profile):

* ``dirty`` — "samples arrived since the last refresh started" (a time, kept a day);
* ``pending`` — a ``core.refresh_job`` message is queued; its value is that message's id. Claimed with an
  atomic add, so a burst of batches within the debounce window queues **one** refresh (the message waits
  ``JOB_REFRESH_DEBOUNCE_SECONDS`` before it runs, and the batches that arrive meanwhile ride along).
  Kept at most ``JOB_REFRESH_LOCK_SECONDS`` + the debounce: a message lost on the way frees the job then;
* ``lock`` — a refresh of the job runs; its value is the message id of that run. Claimed with an atomic
  add for ``JOB_REFRESH_LOCK_SECONDS`` (touched again before each refresher), so at most one refresh per
  job is in flight and a lock left by a dead worker expires on its own.

The task (:func:`run_refresh`): takes the lock, clears ``dirty``, frees ``pending`` (a batch arriving
from now on queues the next refresh), runs every refresher in order, releases the lock, and when the job
was marked dirty while it ran queues itself once more. A message that finds the lock held by another run
frees ``pending`` and ends ("busy"): the running refresh queues the follow-up when it ends. A message that
finds nothing dirty ends ("clean"): an earlier run already covered its batches.

Atomicity: Redis, Memcached and the database cache add atomically; Django's file cache does not (it
checks, then writes), so with it every claim and compare-and-delete runs under an exclusive ``flock`` on
a file in the cache's folder (one host shares one file cache, as it shares the filesystem broker).
Releasing a key checks its value first (only the owner removes it); on Redis that check and the delete
are two commands: a lock that expired and was taken by another run in that instant is removed early,
which at worst lets two refreshes of one job overlap once (every refresher is idempotent).

Jobs are the jobs app's: it registers how a refresh reads one by primary key (with what refreshers need,
its cluster) from its ``AppConfig.ready()`` with :func:`register_job_loader`.
"""
from __future__ import annotations

import fcntl
import logging
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.filebased import FileBasedCache
from django.db import transaction
from django.utils.module_loading import import_string

from .refresh import job_refreshers

logger = logging.getLogger(__name__)

TASK_NAME = "core.refresh_job"
DIRTY_SECONDS = 24 * 3600
_KEYS = {"dirty": "job-refresh:dirty:{}", "pending": "job-refresh:pending:{}", "lock": "job-refresh:lock:{}"}
PRUNE_KEY = "job-refresh:pruned"

_job_loader: Callable[[int], Any] | None = None


def register_job_loader(load: Callable[[int], Any]) -> None:
    """Say how a refresh reads the job with primary key ``pk`` (None when it is gone); again replaces it."""
    global _job_loader
    _job_loader = load


def load_job(job_pk: int):
    if _job_loader is None:
        raise RuntimeError("no job loader is registered (the jobs app registers one in its AppConfig.ready())")
    return _job_loader(job_pk)


def key(kind: str, job_pk: int) -> str:
    return _KEYS[kind].format(int(job_pk))


def debounce_seconds() -> float:
    return float(settings.JOB_REFRESH_DEBOUNCE_SECONDS)


def lock_seconds() -> int:
    return int(settings.JOB_REFRESH_LOCK_SECONDS)


def _cache():
    return caches["default"]


@contextmanager
def _atomic(cache):
    """Make check-then-write cache operations atomic where the backend is not (the file cache)."""
    if not isinstance(cache, FileBasedCache):
        yield
        return
    folder = Path(cache._dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "job-refresh.lock", "a") as handle:  # not *.djcache: the cache's clear() leaves it
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def claim(name: str, value: str, seconds: float) -> bool:
    """Set ``name`` to ``value`` for ``seconds`` unless it is set; True when this call set it."""
    cache = _cache()
    with _atomic(cache):
        return bool(cache.add(name, value, seconds))


def release(name: str, value: str) -> bool:
    """Remove ``name`` if it still holds ``value`` (its owner's); True when removed."""
    cache = _cache()
    with _atomic(cache):
        if cache.get(name) != value:
            return False
        cache.delete(name)
        return True


def holder(name: str):
    return _cache().get(name)


# -- marking -----------------------------------------------------------------------------------

def mark_jobs_dirty(job_pks, reason: str = "") -> list[int]:
    """Say that new samples reached these jobs: each gets one debounced ``core.refresh_job`` unless one is
    already queued. Runs once the current transaction commits (at once outside one), so the task sees what
    the caller wrote; never raises for the broker (the samples are stored: beat's refresh catches up)."""
    pks = sorted({int(pk) for pk in job_pks or ()})
    if pks:
        transaction.on_commit(lambda: _request_all(pks, reason))
    return pks


def _request_all(pks: list[int], reason: str) -> None:
    for pk in pks:
        try:
            request_refresh(pk, reason)
        except Exception:  # noqa: BLE001 - the cache is down: the ingestion that called us still succeeds
            logger.exception("could not mark job %s dirty", pk)


def request_refresh(job_pk: int, reason: str = "", *, queue: str | None = None, countdown: float | None = None) -> str | None:
    """Mark one job dirty and queue its refresh unless one is pending; the queued message's id, or None when
    coalesced into the pending one (or the broker refused it)."""
    cache = _cache()
    cache.set(key("dirty", job_pk), time.time(), DIRTY_SECONDS)
    task_id = uuid.uuid4().hex
    if not claim(key("pending", job_pk), task_id, lock_seconds() + debounce_seconds()):
        return None
    from .tasks import refresh_job_task

    queue = queue or settings.JOB_REFRESH_QUEUE  # default: Celery's default queue
    options = {"queue": queue} if queue else {}
    try:
        refresh_job_task.apply_async(args=[int(job_pk)], kwargs={"reason": reason[:200]}, task_id=task_id,
                                     countdown=debounce_seconds() if countdown is None else countdown, **options)
    except Exception:  # noqa: BLE001 - the broker is down: free the job so a later batch tries again
        release(key("pending", job_pk), task_id)
        logger.exception("could not queue the refresh of job %s", job_pk)
        return None
    return task_id


# -- the lock ------------------------------------------------------------------------------------

TAKEN, TAKEN_OVER = "taken", "taken over"


@contextmanager
def job_refresh_lock(job_pk: int, token: str | None = None, *, queue: str | None = None):
    """Hold the job's refresh lock while the block runs; yields ``TAKEN``, ``TAKEN_OVER`` (the holder had
    this token: the same message delivered again after its worker died) or "" (another refresh holds it).
    On leaving, a job marked dirty meanwhile gets its next refresh queued."""
    token = token or uuid.uuid4().hex
    name = key("lock", job_pk)
    taken = TAKEN if claim(name, token, lock_seconds()) else ""
    if not taken and holder(name) == token:
        _cache().set(name, token, lock_seconds())
        taken = TAKEN_OVER
    try:
        yield taken
    finally:
        if taken:
            release(name, token)
            if _cache().get(key("dirty", job_pk)) is not None:
                request_refresh(job_pk, "marked dirty while it was refreshed", queue=queue)


def keep_lock(job_pk: int, token: str) -> None:
    """A long refresh says it is alive: its lock lasts another ``JOB_REFRESH_LOCK_SECONDS``."""
    cache = _cache()
    with _atomic(cache):
        if cache.get(key("lock", job_pk)) == token:
            cache.touch(key("lock", job_pk), lock_seconds())


# -- the task's body -------------------------------------------------------------------------------

def run_refresh(task, job_pk: int, *, reason: str = "", force: bool = False) -> dict:
    """Bring every registered product of one job up to date (the body of ``core.refresh_job``)."""
    from .tasks import task_run_begin

    request = getattr(task, "request", None)
    token = getattr(request, "id", None) or uuid.uuid4().hex
    queue = ((getattr(request, "delivery_info", None) or {}).get("routing_key")) or None
    cache = _cache()
    outcome = {"job": int(job_pk)}
    with job_refresh_lock(job_pk, token, queue=queue) as taken:
        if not taken:
            release(key("pending", job_pk), token)
            return {**outcome, "status": "busy"}
        was_dirty = cache.get(key("dirty", job_pk)) is not None
        # Order matters: a batch that lands after this delete marks the job again, and from the release
        # on it queues the next refresh itself; one that landed before is already in the store we read.
        cache.delete(key("dirty", job_pk))
        release(key("pending", job_pk), token)
        redelivered = taken == TAKEN_OVER or bool((getattr(request, "delivery_info", None) or {}).get("redelivered"))
        if not (was_dirty or force or redelivered):
            return {**outcome, "status": "clean"}
        job = load_job(job_pk)
        if job is None:
            return {**outcome, "status": "gone"}
        refreshers = job_refreshers()
        run = task_run_begin(task, TASK_NAME, f"job {job.cluster.name}/{job.job_id}",
                             f"refreshing {', '.join(r.name for r in refreshers) or 'nothing'}"
                             + (f" ({reason})" if reason else ""), total=100)
        if run is None:
            return {**outcome, "status": "skipped"}
        failures, done = [], []
        for index, refresher in enumerate(refreshers):
            keep_lock(job_pk, token)
            low, high = 100 * index // len(refreshers), 100 * (index + 1) // len(refreshers)

            def report(share, message="", *, _low=low, _high=high, _name=refresher.name):
                run.report(int(_low + (_high - _low) * min(max(float(share), 0.0), 100.0) / 100), f"{_name}: {message}")

            try:
                import_string(refresher.refresh)(job, report)
                done.append(refresher.name)
            except SoftTimeLimitExceeded:
                run.finish(error=f"{refresher.name}: ran out of time")
                raise
            except Exception as exc:  # noqa: BLE001 - recorded; the next refresher still runs
                logger.exception("refresher %s failed for job %s", refresher.name, job_pk)
                failures.append(f"{refresher.name}: {type(exc).__name__}: {exc}")
        run.finish(error="; ".join(failures)[:480])
    _prune_runs()
    return {**outcome, "status": "failed" if failures else "refreshed", "refreshed": done, "failed": failures}


def _prune_runs() -> None:
    """Keep ``JOB_REFRESH_KEEP_RUNS_HOURS`` (default 2) of succeeded ``core.refresh_job`` runs: one per refresh
    per job adds up to tens of thousands an hour on a busy machine. At most every ten minutes."""
    from datetime import timedelta

    from django.utils import timezone

    from .models import TaskRun, TaskRunStatusChoices

    hours = float(settings.JOB_REFRESH_KEEP_RUNS_HOURS)
    if not claim(PRUNE_KEY, "1", 600):
        return
    TaskRun.objects.filter(name=TASK_NAME, status=TaskRunStatusChoices.STATUS_SUCCEEDED,
                           created__lt=timezone.now() - timedelta(hours=hours)).delete()
