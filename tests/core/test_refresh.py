"""Live refresh of job products (apps/core/refresh.py, apps/core/live.py, the core.refresh_job task): the
registry's order, coalescing, one refresh in flight per job, the follow-up when a job is marked during a
run, a failing refresher that does not stop the others, and a dead worker's lock that expires.

The in-process tests run the real task with ``apply()`` against the real cache; the worker tests start
a real Celery worker (prefork, two processes, its own queue) that imports tests/core/refresh_probe.py,
whose refreshers log what ran and when."""
import sys
import time
import uuid

import pytest
from django.core.cache import cache
from django.utils import timezone

from apps.core import live, refresh
from apps.core.live import claim, job_refresh_lock, key, mark_jobs_dirty, request_refresh
from apps.core.models import TaskRun
from apps.core.refresh import JobRefresher, job_refreshers, register_job_refresher
from apps.core.tasks import refresh_job_task

from . import refresh_probe

UNCONSUMED = "refresh-tests-nobody"  # in-process tests queue messages no worker reads


@pytest.fixture
def registry():
    """The registry as the apps left it, restored afterwards."""
    saved = refresh._refreshers.snapshot()
    yield refresh._refreshers
    refresh._refreshers.restore(saved)


@pytest.fixture
def probes(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("REFRESH_PROBE_DIR", str(tmp_path))
    registry.clear()
    refresh_probe.register()
    return tmp_path


def make_job(job_id: int, cluster: str = "refresh-tests"):
    from apps.jobs.models import Cluster, Job

    cluster, _ = Cluster.objects.get_or_create(name=cluster)
    job = Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a", state="RUNNING",
                             submit_time=timezone.now())
    cache.delete_many([key(kind, job.pk) for kind in ("dirty", "pending", "lock")])
    return job


def names(rows, event="start"):
    return [row["name"] for row in rows if row["event"] == event]


# -- the registry ------------------------------------------------------------------------------------

def test_refreshers_run_by_order_then_name_and_a_name_registers_once(registry):
    registry.clear()
    register_job_refresher(JobRefresher(name="saturation", order=20, refresh="x.saturation"))
    register_job_refresher(JobRefresher(name="telemetry", order=10, refresh="x.telemetry"))
    register_job_refresher(JobRefresher(name="alpha", order=20, refresh="x.alpha"))
    register_job_refresher(JobRefresher(name="telemetry", order=10, refresh="x.telemetry2"))
    assert [(r.name, r.refresh) for r in job_refreshers()] == [
        ("telemetry", "x.telemetry2"), ("alpha", "x.alpha"), ("saturation", "x.saturation")]


def test_the_telemetry_cube_is_registered_before_products_built_on_it():
    registered = {r.name: r for r in job_refreshers()}
    assert registered["telemetry"].order == 10
    assert registered["telemetry"].refresh == "apps.telemetry.services.job_telemetry_update"


# -- in process: the task's rules --------------------------------------------------------------------

@pytest.mark.django_db
def test_every_refresher_runs_in_order_and_a_failing_one_is_recorded_without_stopping_the_rest(probes):
    job = make_job(1)
    (probes / f"boom-{job.pk}").touch()
    cache.set(key("dirty", job.pk), time.time())
    result = refresh_job_task.apply(args=[job.pk], task_id="run-1").get()
    assert result["status"] == "failed" and result["refreshed"] == ["probe-first", "probe-last"]
    assert names(refresh_probe.entries(job.pk)) == ["probe-first", "probe-boom", "probe-last"]
    run = TaskRun.objects.get(name="core.refresh_job", celery_task_id="run-1")
    assert run.status == "failed" and run.subject == f"job refresh-tests/{job.job_id}"
    assert "probe-boom: RuntimeError: the probe refresher failed on purpose" in run.message
    assert "probe-first: probing" in run.log
    assert cache.get(key("lock", job.pk)) is None and cache.get(key("dirty", job.pk)) is None


@pytest.mark.django_db
def test_a_message_with_nothing_dirty_does_nothing_unless_forced(probes):
    job = make_job(2)
    assert refresh_job_task.apply(args=[job.pk]).get()["status"] == "clean"
    assert refresh_probe.entries(job.pk) == []
    assert refresh_job_task.apply(args=[job.pk], kwargs={"force": True}).get()["status"] == "refreshed"
    assert names(refresh_probe.entries(job.pk)) == ["probe-first", "probe-boom", "probe-last"]


@pytest.mark.django_db
def test_a_burst_of_marks_queues_one_message(probes, settings):
    job = make_job(3)
    queued = [request_refresh(job.pk, "batch", queue=UNCONSUMED) for _ in range(5)]
    assert len([q for q in queued if q]) == 1 and queued[0]
    assert cache.get(key("pending", job.pk)) == queued[0]
    # The queued message starts: from then on the next batch queues the next refresh.
    cache.set(key("dirty", job.pk), time.time())
    assert refresh_job_task.apply(args=[job.pk], task_id=queued[0]).get()["status"] == "refreshed"
    assert cache.get(key("pending", job.pk)) is None
    assert request_refresh(job.pk, "batch", queue=UNCONSUMED) is not None


@pytest.mark.django_db
def test_a_message_that_finds_the_job_refreshing_frees_the_queue_and_leaves_the_work_to_the_running_one(probes):
    job = make_job(4)
    pending = request_refresh(job.pk, "batch", queue=UNCONSUMED)
    with job_refresh_lock(job.pk, "the-running-one", queue=UNCONSUMED) as taken:
        assert taken
        assert refresh_job_task.apply(args=[job.pk], task_id=pending).get()["status"] == "busy"
        assert refresh_probe.entries(job.pk) == []
        assert cache.get(key("pending", job.pk)) is None  # a later batch may queue again...
        assert cache.get(key("dirty", job.pk)) is not None  # ...and the work is still owed
    # Leaving the lock with the job dirty queued the follow-up.
    assert cache.get(key("pending", job.pk)) is not None


@pytest.mark.django_db
def test_the_same_message_delivered_again_after_its_worker_died_takes_its_lock_over(probes):
    job = make_job(5)
    assert claim(key("lock", job.pk), "killed-message", 600)  # its worker died holding it; dirty was cleared
    assert refresh_job_task.apply(args=[job.pk], task_id="killed-message").get()["status"] == "refreshed"
    assert cache.get(key("lock", job.pk)) is None


@pytest.mark.django_db
def test_a_dead_workers_lock_expires_after_the_lock_seconds(probes, settings):
    settings.JOB_REFRESH_LOCK_SECONDS = 1
    job = make_job(6)
    dead = job_refresh_lock(job.pk, "dead-worker")
    assert dead.__enter__()  # taken, never left: the worker died inside
    cache.set(key("dirty", job.pk), time.time())
    assert refresh_job_task.apply(args=[job.pk]).get()["status"] == "busy"
    time.sleep(1.3)
    assert refresh_job_task.apply(args=[job.pk]).get()["status"] == "refreshed"
    assert names(refresh_probe.entries(job.pk)) == ["probe-first", "probe-boom", "probe-last"]


@pytest.mark.django_db
def test_marks_wait_for_the_commit(probes, django_capture_on_commit_callbacks):
    job = make_job(7)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert mark_jobs_dirty([job.pk, job.pk], reason="test") == [job.pk]
        assert cache.get(key("dirty", job.pk)) is None
    assert len(callbacks) == 1


# -- a real worker -------------------------------------------------------------------------------------

PROBE_QUEUE = "refresh-probe"


@pytest.fixture(scope="module")
def probe_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    from tests.conftest import ServiceProcess, service_environment

    folder = tmp_path_factory.mktemp("refresh-probe")
    with django_db_blocker.unblock():
        env = service_environment(REFRESH_PROBE_DIR=str(folder))
    worker = ServiceProcess(
        "celery-refresh-probe",
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=prefork", "--concurrency=2",
         f"--queues={PROBE_QUEUE}", "--include=tests.core.refresh_probe", "--without-mingle", "--without-gossip",
         "--loglevel=INFO", f"--hostname=refresh-probe-{uuid.uuid4().hex[:8]}@%h"],
        env, ready_marker=" ready.")
    worker.folder = folder
    yield worker
    worker.stop()


@pytest.fixture
def worker(probe_worker, settings, monkeypatch):
    settings.JOB_REFRESH_QUEUE = PROBE_QUEUE
    settings.JOB_REFRESH_DEBOUNCE_SECONDS = 1.0
    monkeypatch.setenv("REFRESH_PROBE_DIR", str(probe_worker.folder))
    return probe_worker


def wait_for(predicate, worker, timeout=30.0, message=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{message}; the worker's log ends with:\n{worker.log_text()[-3000:]}")


def runs(job_pk):
    return [row for row in refresh_probe.entries(job_pk) if row["name"] == "probe-first"]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_worker_batches_within_the_debounce_window_make_one_refresh(worker):
    job = make_job(101)
    marked = time.time()
    for _ in range(6):
        mark_jobs_dirty([job.pk], reason="batch")
        time.sleep(0.1)
    wait_for(lambda: len(names(runs(job.pk), "end")) == 1, worker, message="no refresh ran")
    time.sleep(2.5)  # more than the debounce again: nothing else comes
    rows = refresh_probe.entries(job.pk)
    assert names(rows) == ["probe-first", "probe-boom", "probe-last"]
    assert rows[0]["t"] - marked >= 1.0  # it waited for the debounce
    assert TaskRun.objects.filter(name="core.refresh_job", subject=f"job refresh-tests/{job.job_id}").count() == 1


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_worker_one_refresh_in_flight_and_one_follow_up_when_marked_during_it(worker):
    from celery.result import AsyncResult

    job = make_job(102)
    hold = worker.folder / f"hold-{job.pk}"
    hold.touch()
    first = request_refresh(job.pk, "first batch")
    wait_for(lambda: len(runs(job.pk)) == 1, worker, message="the first refresh did not start")
    second = request_refresh(job.pk, "a batch while it runs")  # the other worker process takes this one
    assert second is not None
    assert AsyncResult(second).get(timeout=30) == {"job": job.pk, "status": "busy"}
    assert len(runs(job.pk)) == 1
    hold.unlink()
    assert AsyncResult(first).get(timeout=30)["status"] == "refreshed"
    wait_for(lambda: len(names(runs(job.pk), "end")) == 2, worker, message="no follow-up refresh")
    time.sleep(2.5)
    rows = runs(job.pk)
    starts, ends = [r["t"] for r in rows if r["event"] == "start"], [r["t"] for r in rows if r["event"] == "end"]
    assert len(starts) == 2 and starts[1] >= ends[0]  # never two at once
    messages = list(TaskRun.objects.filter(subject=f"job refresh-tests/{job.job_id}").values_list("message", flat=True))
    assert len(messages) == 2


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_worker_a_failing_refresher_is_recorded_and_the_next_still_runs(worker):
    job = make_job(103)
    (worker.folder / f"boom-{job.pk}").touch()
    mark_jobs_dirty([job.pk])
    wait_for(lambda: "probe-last" in names(refresh_probe.entries(job.pk)), worker, message="probe-last did not run")
    assert names(refresh_probe.entries(job.pk)) == ["probe-first", "probe-boom", "probe-last"]
    wait_for(lambda: TaskRun.objects.filter(subject=f"job refresh-tests/{job.job_id}", status="failed").exists(), worker,
             message="the failure was not recorded")
    run = TaskRun.objects.get(subject=f"job refresh-tests/{job.job_id}")
    assert "probe-boom" in run.message and "failed on purpose" in run.message


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_worker_a_lock_left_by_a_dead_worker_expires(worker):
    from celery.result import AsyncResult

    job = make_job(104)
    claimed = time.monotonic()
    assert claim(key("lock", job.pk), "a-worker-that-died", 6)  # as if JOB_REFRESH_LOCK_SECONDS were 6
    blocked = request_refresh(job.pk, "batch")
    assert AsyncResult(blocked).get(timeout=30)["status"] == "busy"
    assert runs(job.pk) == []
    time.sleep(max(0.0, claimed + 6.2 - time.monotonic()))
    later = request_refresh(job.pk, "the next batch")
    assert AsyncResult(later).get(timeout=30)["status"] == "refreshed"
    assert names(refresh_probe.entries(job.pk)) == ["probe-first", "probe-boom", "probe-last"]


def test_the_live_module_keeps_its_keys_per_job():
    assert key("pending", 7) != key("pending", 8) != key("lock", 7)
    assert live.TASK_NAME == refresh_job_task.name == "core.refresh_job"
