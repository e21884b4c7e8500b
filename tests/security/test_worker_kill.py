"""Acceptance 3 (issue 16) and 5 (issue 33): SIGKILL of the worker during ``saturation.score_job`` on a
real prefork worker. The task is held mid-run by a file (test profile only, ``apps.core.tasks.hold_for_tests``),
so the kill lands while it runs, not by a race with a sleep.

* the pool child is killed: its parent hands the message back (acks_late + reject_on_worker_lost)
  and a new child runs it again;
* then the whole worker (main process and child) is killed and a new worker started: on Redis the
  unacknowledged message comes back after the visibility timeout; the embedded filesystem broker keeps
  a copy of each message a worker took until it is acknowledged (portal/broker.py), and the new worker
  puts the dead one's copies back at once (issue 33 finding 4: before, the message was gone and only the
  sweeper, half an hour later, queued the job again);
* the previous score stays readable through the API all along, and the job is scored exactly once.

Issue 33 also runs ``make run``'s own worker ([program:worker] of deploy/supervisord.conf, with its restart
and stop settings) under a supervisord of its own: a SIGKILL of its main process is repaired within two
minutes (finding 4), and Ctrl-C lets the running task finish before the worker stops (finding 5).
"""
import configparser
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

HOSTS = [f"nid{n:06d}" for n in range(801, 805)]
TASK = "saturation.score_job"


def started_pids(folder: Path) -> list[int]:
    """Pids of the processes that reached the hold point, in the order they got there."""
    marks = sorted(folder.glob(f"{TASK}.started.*"), key=lambda path: int(path.name.rsplit(".", 1)[1]))
    return [int(path.name.rsplit(".", 2)[1]) for path in marks]


def wait_for(predicate, what: str, logs, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; worker logs:\n" + "\n----\n".join(log()[-2500:] for log in logs))


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie child of the killed worker counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_sigkill_mid_scoring_is_redelivered_done_once_and_the_old_score_stays_visible(start_service, api_client, make_user,
                                                                                      tmp_path, settings):
    from apps.core.models import TaskRun
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation
    from apps.saturation.services import job_saturation_refresh
    from apps.saturation.tasks import score_job_task
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store
    from apps.telemetry.synthetic_jobs import job_chunks

    redis = settings.CELERY_BROKER_URL.startswith("redis")
    cluster = f"kill{uuid.uuid4().hex[:6]}"
    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name=cluster), job_id=4242, user_name="alice", account="a-kill",
                             state="RUNNING", submit_time=start - timedelta(minutes=1), start_time=start, node_list=HOSTS)
    reset_telemetry_stores()  # the portal's own store, which the worker processes open too
    for chunk in job_chunks("megatron", HOSTS, start, 2000, cluster=cluster, seed=7):
        telemetry_store().write(chunk)
    previous = job_saturation_refresh(job)
    assert previous.status == "ready" and previous.score is not None
    api_client.force_authenticate(make_user("alice"))
    url = f"/api/v1/jobs/{cluster}/4242/saturation/"

    def old_score_visible(scoring: bool = True):
        response = api_client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["job_score"] == previous.score and body["computed"] is not None
        assert (body["scoring_since"] is not None) == scoring, body

    old_score_visible(scoring=False)
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / f"{TASK}.hold").touch()
    queue = f"worker-kill-{uuid.uuid4().hex[:8]}"
    worker_args = ["-m", "celery", "-A", "portal", "worker", "--pool=prefork", "--concurrency=1", "-Q", queue,
                   "--without-mingle", "--without-gossip", "--loglevel=INFO"]
    worker_env = dict(BELVEDERE_TEST_HOLD_DIR=str(hold_dir), CELERY_VISIBILITY_TIMEOUT="6",
                      CELERY_UNACKED_RESTORE_INTERVAL="1", CELERY_UNACKED_RESTORE_THROTTLE="1")
    first = start_service("kill-worker-1", [*worker_args, f"--hostname=kill1-{queue}@%h"], " ready.", **worker_env)
    logs = [first.log_text]
    score_job_task.apply_async(args=[job.pk], queue=queue)

    # 1. SIGKILL the pool child while it scores: the parent requeues, a new child runs it again.
    child = wait_for(lambda: started_pids(hold_dir), "the first run to start", logs)[0]
    assert child != first.pid
    old_score_visible()
    os.kill(child, signal.SIGKILL)
    second_child = wait_for(lambda: started_pids(hold_dir)[1:], "the redelivery after the pool child was killed", logs)[0]
    assert second_child not in (child, first.pid)
    assert "WorkerLostError" in first.log_text() or "signal 9" in first.log_text()
    old_score_visible()

    # 2. SIGKILL the whole worker (main process, then its child), and start another one.
    os.kill(first.pid, signal.SIGKILL)
    os.kill(second_child, signal.SIGKILL)
    wait_for(lambda: gone(first.pid) and gone(second_child), "the killed worker to be gone", logs)
    old_score_visible()
    second = start_service("kill-worker-2", [*worker_args, f"--hostname=kill2-{queue}@%h"], " ready.", **worker_env)
    logs.append(second.log_text)
    # The message comes back by itself: Redis after the visibility timeout, the filesystem broker from the
    # dead worker's folder of taken messages as soon as the new worker looks for messages. No sweeper.
    third_child = wait_for(lambda: started_pids(hold_dir)[2:], "the run after the worker was killed", logs)[0]
    assert third_child not in (child, second_child)
    old_score_visible()

    # 3. Let it finish: it completes once, and nothing runs it again afterwards.
    (hold_dir / f"{TASK}.hold").unlink()
    runs = TaskRun.objects.filter(name=TASK, subject=f"job {cluster}/4242")
    wait_for(lambda: runs.filter(status="succeeded").exists(), "the redelivered run to complete", logs)
    time.sleep(8 if redis else 3)  # past the visibility timeout: a second completion would show now
    assert len(started_pids(hold_dir)) == 3
    assert runs.filter(status="succeeded").count() == 1, list(runs.values("status", "message", "celery_task_id"))
    record = JobSaturation.objects.get(job=job)
    assert record.status == "ready" and record.scoring_since is None and record.computed > previous.computed
    body = api_client.get(url).json()
    assert body["job_score"] == record.score and body["scoring_since"] is None
    assert Path(settings.DATA_DIR, record.product).exists()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_killing_both_pool_children_does_not_wedge_the_worker(start_service, tmp_path):
    """Issue 16 item 3: "killing both pool children wedged the worker (it kept taking tasks, ran none)".
    Both children are killed mid-task with more tasks queued: the worker replaces them, runs the two
    killed tasks again and the queued ones once each, and still answers a ping."""
    from apps.core.models import TaskRun
    from apps.core.tasks import ping_task
    from apps.jobs.models import Cluster, Job
    from apps.saturation.tasks import score_job_task

    cluster = Cluster.objects.create(name=f"wedge{uuid.uuid4().hex[:6]}")
    now = timezone.now()
    jobs = [Job.objects.create(cluster=cluster, job_id=n, user_name="a", account="a", state="RUNNING", submit_time=now,
                               start_time=now - timedelta(minutes=5), node_list=["nid009999"]) for n in range(1, 7)]
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / f"{TASK}.hold").touch()
    queue = f"wedge-{uuid.uuid4().hex[:8]}"
    worker = start_service("wedge-worker", ["-m", "celery", "-A", "portal", "worker", "--pool=prefork", "--concurrency=2", "-Q",
                                            queue, "--without-mingle", "--without-gossip", "--loglevel=INFO",
                                            f"--hostname={queue}@%h"], " ready.", BELVEDERE_TEST_HOLD_DIR=str(hold_dir))
    for job in jobs:
        score_job_task.apply_async(args=[job.pk], queue=queue)
    children = wait_for(lambda: started_pids(hold_dir)[:2] if len(started_pids(hold_dir)) >= 2 else None,
                        "both children to hold a task", [worker.log_text])
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(started_pids(hold_dir)) >= 4, "the replaced children to run the killed tasks again", [worker.log_text])
    (hold_dir / f"{TASK}.hold").unlink()
    assert ping_task.apply_async(args=["after"], queue=queue).get(timeout=60)["nonce"] == "after"
    subjects = [f"job {cluster.name}/{job.job_id}" for job in jobs]
    runs = TaskRun.objects.filter(name=TASK, subject__in=subjects)
    wait_for(lambda: runs.filter(status="succeeded").count() == 6, "every job to be scored", [worker.log_text])
    time.sleep(2)
    assert sorted(runs.filter(status="succeeded").values_list("subject", flat=True)) == sorted(subjects)


# ---------------------------------------------------------------------------------------------------------------
# make run's own worker under a supervisord of its own (issue 33, findings 4 and 5)
# ---------------------------------------------------------------------------------------------------------------
BASE_DIR = Path(__file__).resolve().parents[2]


class SupervisedWorker:
    """``[program:worker]`` of deploy/supervisord.conf as ``make run`` has it (command, restart and stop settings),
    consuming only ``queue``, under a supervisord started as deploy/supervise.py starts it (its own process group,
    so a SIGINT to that group is what Ctrl-C in make run's terminal sends)."""

    def __init__(self, folder: Path, queue: str, **extra_env):
        from tests.conftest import service_environment

        deployed = configparser.RawConfigParser()
        deployed.read(BASE_DIR / "deploy" / "supervisord.conf")
        program = dict(deployed["program:worker"])
        assert "--hostname=worker@%%h" in program["command"], program["command"]
        program.update(autostart="true", stdout_logfile=str(folder / "worker.log"),
                       command=program["command"].replace("--hostname=worker@%%h", f"--hostname={queue}@%%h") + f" -Q {queue}")
        config = configparser.RawConfigParser()
        config["supervisord"] = {"nodaemon": "true", "logfile": str(folder / "supervisord.log"),
                                 "pidfile": str(folder / "supervisord.pid"), "childlogdir": str(folder),
                                 "directory": str(BASE_DIR), "loglevel": "info"}
        config["program:worker"] = program
        self.config_path = folder / "supervisord.conf"
        with open(self.config_path, "w") as handle:
            config.write(handle)
        self.folder = folder
        env = service_environment(BELVEDERE_BIN=str(Path(sys.executable).parent), BELVEDERE_BASE_DIR=str(BASE_DIR),
                                  BELVEDERE_START_BACKGROUND="true", **extra_env)
        env.setdefault("BELVEDERE_STOP_GRACE_SECONDS", "30")  # as deploy/supervise.py sets it
        self._log = open(folder / "supervisord.out", "w")
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "supervisord"), "--configuration",
                                         str(self.config_path)], cwd=BASE_DIR, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, process_group=0)
        self.main_pids: set[int] = set()
        wait_for(lambda: self.log().count(" ready.") >= 1, "make run's worker to be ready", [self.logs])

    def log(self) -> str:
        path = self.folder / "worker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        supervisord = self.folder / "supervisord.log"
        return self.log() + "\n---- supervisord\n" + (supervisord.read_text() if supervisord.exists() else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self.main_pids:  # a worker left behind by a failed test
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        self._log.close()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[1])


def scored_job(prefix: str):
    """A running job with telemetry and a score, as the whole-worker kill test above makes it."""
    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store
    from apps.telemetry.synthetic_jobs import job_chunks

    cluster = f"{prefix}{uuid.uuid4().hex[:6]}"
    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name=cluster), job_id=4343, user_name="alice", account="a-kill",
                             state="RUNNING", submit_time=start - timedelta(minutes=1), start_time=start, node_list=HOSTS)
    reset_telemetry_stores()
    for chunk in job_chunks("megatron", HOSTS, start, 600, cluster=cluster, seed=7):
        telemetry_store().write(chunk)
    previous = job_saturation_refresh(job)
    assert previous.status == "ready" and previous.score is not None
    return job, previous


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_make_runs_worker_killed_outright_gets_its_task_back_done_once_within_two_minutes(tmp_path, api_client, client,
                                                                                        make_user):
    """Issue 33 finding 4, acceptance 5: SIGKILL of the main process of make run's worker while it scores a job.
    supervisord starts a new worker; the task comes back to it and completes once; within two minutes of the
    kill the lost run says "requeued" (never "running"), the job's scoring is done and its page says so."""
    from apps.core.models import TaskRun
    from apps.saturation.models import JobSaturation
    from apps.saturation.tasks import score_job_task

    job, previous = scored_job("sup")
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / f"{TASK}.hold").touch()
    queue = f"make-run-kill-{uuid.uuid4().hex[:8]}"
    worker = SupervisedWorker(tmp_path, queue, BELVEDERE_TEST_HOLD_DIR=str(hold_dir), CELERY_VISIBILITY_TIMEOUT="6",
                              CELERY_UNACKED_RESTORE_INTERVAL="1", CELERY_UNACKED_RESTORE_THROTTLE="1")
    try:
        message = score_job_task.apply_async(args=[job.pk], queue=queue)
        child = wait_for(lambda: started_pids(hold_dir), "the scoring to start", [worker.logs])[0]
        main = parent_of(child)
        worker.main_pids.add(main)
        assert "celery" in Path(f"/proc/{main}/cmdline").read_text() and parent_of(main) == worker.process.pid
        runs = TaskRun.objects.filter(name=TASK, celery_task_id=message.id)
        lost = runs.get()
        assert lost.status == "running"
        api_client.force_authenticate(make_user("alice"))
        url = f"/api/v1/jobs/{job.cluster.name}/{job.job_id}/saturation/"
        assert api_client.get(url).json()["scoring_since"] is not None

        os.kill(main, signal.SIGKILL)  # the main process alone: its pool child dies with it (PR_SET_PDEATHSIG)
        killed = time.monotonic()
        wait_for(lambda: gone(main) and gone(child), "the killed worker to be gone", [worker.logs])
        # supervisord starts a new worker, which puts the dead one's message back: the run starts again.
        wait_for(lambda: started_pids(hold_dir)[1:], "the task to come back after the worker was killed", [worker.logs],
                 timeout=120 - (time.monotonic() - killed))
        new_main = parent_of(started_pids(hold_dir)[1])
        worker.main_pids.add(new_main)
        assert new_main != main and parent_of(new_main) == worker.process.pid  # supervisord's restart
        lost.refresh_from_db()
        assert lost.status == "requeued" and "lost" in lost.message, (lost.status, lost.message)
        staff = make_user("staff-kill", is_staff=True)
        client.force_login(staff)
        staff_page = client.get("/staff/").content.decode()
        assert 'data-state="requeued"' in staff_page

        (hold_dir / f"{TASK}.hold").unlink()
        wait_for(lambda: runs.filter(status="succeeded").exists(), "the task to complete", [worker.logs],
                 timeout=120 - (time.monotonic() - killed))
        record = JobSaturation.objects.get(job=job)
        body = api_client.get(url).json()
        assert time.monotonic() - killed < 120
        assert record.status == "ready" and record.scoring_since is None and record.computed > previous.computed
        assert body["scoring_since"] is None and body["job_score"] == record.score
        time.sleep(2)  # a second delivery would show now
        assert len(started_pids(hold_dir)) == 2
        assert sorted(runs.values_list("status", flat=True)) == ["requeued", "succeeded"]
    finally:
        (hold_dir / f"{TASK}.hold").unlink(missing_ok=True)
        worker.stop()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_ctrl_c_lets_make_runs_worker_finish_its_running_task_then_stop(tmp_path):
    """Issue 33 finding 5: Ctrl-C (SIGINT to supervisord's process group, as make run's terminal sends it) while
    make run's worker scores a job: the pool child is not killed, the task completes once, and the worker then
    exits by itself well within BELVEDERE_STOP_GRACE_SECONDS (not killed after it)."""
    from apps.core.models import TaskRun
    from apps.saturation.models import JobSaturation
    from apps.saturation.tasks import score_job_task

    job, previous = scored_job("stop")
    hold_dir = tmp_path / "hold"
    hold_dir.mkdir()
    (hold_dir / f"{TASK}.hold").touch()
    queue = f"make-run-stop-{uuid.uuid4().hex[:8]}"
    worker = SupervisedWorker(tmp_path, queue, BELVEDERE_TEST_HOLD_DIR=str(hold_dir), BELVEDERE_STOP_GRACE_SECONDS="40")
    try:
        message = score_job_task.apply_async(args=[job.pk], queue=queue)
        child = wait_for(lambda: started_pids(hold_dir), "the scoring to start", [worker.logs])[0]
        main = parent_of(child)
        worker.main_pids.add(main)
        os.killpg(worker.process.pid, signal.SIGINT)  # Ctrl-C
        stopping = time.monotonic()
        wait_for(lambda: "Warm shutdown" in worker.log() or gone(child), "the worker to begin its warm shutdown",
                 [worker.logs])
        time.sleep(1)
        assert not gone(child), "the pool child was killed with its task running:\n" + worker.logs()[-3000:]
        assert worker.process.poll() is None and not gone(main)
        (hold_dir / f"{TASK}.hold").unlink()
        assert worker.process.wait(timeout=40) == 0
        took = time.monotonic() - stopping
        assert gone(main) and gone(child)
        assert took < 30, f"the stop took {took:.0f} s: the worker was killed after the grace period, not stopped"
        assert "stopped: worker (exit status 0)" in (tmp_path / "supervisord.log").read_text(), worker.logs()[-3000:]
        runs = TaskRun.objects.filter(name=TASK, celery_task_id=message.id)
        assert list(runs.values_list("status", flat=True)) == ["succeeded"]
        assert len(started_pids(hold_dir)) == 1
        record = JobSaturation.objects.get(job=job)
        assert record.scoring_since is None and record.computed > previous.computed
    finally:
        (hold_dir / f"{TASK}.hold").unlink(missing_ok=True)
        worker.stop()
