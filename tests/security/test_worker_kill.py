"""Acceptance 3 (issue 16): SIGKILL of the worker during ``saturation.score_job`` on a real prefork
worker. The task is held mid-run by a file (test profile only, ``apps.core.tasks.hold_for_tests``),
so the kill lands while it runs, not by a race with a sleep.

* the pool child is killed: its parent hands the message back (acks_late + reject_on_worker_lost)
  and a new child runs it again;
* then the whole worker (main process and child) is killed and a new worker started: on Redis the
  unacknowledged message comes back after the visibility timeout; kombu's filesystem broker keeps no
  copy of a message a worker took, so there the sweeper ends the orphaned scoring and queues it again;
* the previous score stays readable through the API all along, and the job is scored exactly once.
"""
import os
import signal
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
    from apps.saturation.tasks import score_job_task, sweep_stale_scoring_task
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
    if not redis:
        # The filesystem broker deleted the message when the first worker took it: nothing comes
        # back by itself. The sweeper finds the scoring that never finished and queues it again.
        time.sleep(2)
        assert len(started_pids(hold_dir)) == 2, "the filesystem broker cannot redeliver a message a dead worker held"
        settings.TASK_STALE_SECONDS = 0
        assert sweep_stale_scoring_task(queue=queue) == [job.pk]  # to this test's worker, not the session's
        record = JobSaturation.objects.get(job=job)
        assert record.status == "ready" and "never finished" in record.message and record.scoring_since is None
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
