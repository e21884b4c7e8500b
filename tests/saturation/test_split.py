"""Scoring a job from scratch in node blocks (issue 18): a chord of ``saturation.score_block`` tasks and
``saturation.merge_blocks`` gives what one task gives, on a real worker; its progress is a TaskRun; a
block that fails leaves the previous score with the reason. And the tasks that keep running jobs up to
date: ``saturation.update_job`` (incremental) from beat's ``score_recent_jobs``."""
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import TaskRun
from apps.saturation.models import JobSaturation
from apps.saturation.services import (
    SPLIT_PREFIX, job_saturation_refresh, merge_blocks, score_block, split_folder, split_plan, state_folder,
)
from apps.saturation.tasks import score_job_task, score_recent_jobs_task, start_split_scoring, update_job_task
from apps.telemetry.synthetic_jobs import job_chunks

from .test_incremental import assert_same_result, snapshot

HOSTS = [f"nid{n:06d}" for n in range(21, 29)]


def make_job(store, *, job_id: int, finished: bool, minutes: int = 30, cluster: str = "alps"):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=minutes + 2)
    job = Job.objects.create(cluster=Cluster.objects.get_or_create(name=cluster)[0], job_id=job_id, user_name="alice",
                             account="a-llm01", state="COMPLETED" if finished else "RUNNING", submit_time=start,
                             start_time=start, end_time=start + timedelta(minutes=minutes) if finished else None,
                             node_list=HOSTS)
    for chunk in job_chunks("megatron", HOSTS, start, minutes * 60, seed=job_id, cluster=cluster):
        store.write(chunk)
    return job


def test_blocks_merged_in_node_order_equal_one_scoring(store, db):
    job = make_job(store, job_id=601, finished=True)
    single = snapshot(job_saturation_refresh(job))
    plan = split_plan(job, "s1", block_nodes=3)
    assert plan["blocks"] == 3 and plan["hosts"] == HOSTS
    for block in reversed(range(plan["blocks"])):  # in any order, as workers take them
        assert score_block(job, "s1", block)["status"] == "scored"
    assert score_block(job, "s1", 1)["status"] == "done before"  # a message delivered again
    merged = merge_blocks(job, "s1")
    assert merged.last_read["mode"] == "split" and merged.status == "ready"
    assert_same_result(snapshot(merged), single)
    assert not split_folder(job, "s1").exists() and merge_blocks(job, "s1") is None


def test_a_running_job_split_leaves_the_state_the_next_update_extends(store, db):
    from apps.saturation.services import job_saturation_update

    job = make_job(store, job_id=602, finished=False)
    split_plan(job, "s2", block_nodes=4)
    for block in range(2):
        score_block(job, "s2", block)
    merge_blocks(job, "s2")
    assert (state_folder(job) / "state.json").exists()
    assert job_saturation_update(job).last_read["mode"] == "incremental"


def test_update_job_task_scores_from_scratch_then_incrementally_and_once_per_message(store, db):
    job = make_job(store, job_id=603, finished=False)
    first = update_job_task.apply(args=[job.pk], task_id="update-1").get()
    assert first["status"] == "ready" and first["mode"] == "full"
    second = update_job_task.apply(args=[job.pk], task_id="update-2").get()
    assert second["mode"] == "incremental"
    assert update_job_task.apply(args=[job.pk], task_id="update-2").get()["status"] == "skipped"
    record = JobSaturation.objects.get(job=job)
    assert record.scoring_since is None and record.scoring_task == ""
    assert TaskRun.objects.filter(name="saturation.update_job", status="succeeded").count() == 2


def test_beat_updates_running_jobs_and_scores_finished_ones(store, db, settings):
    running = make_job(store, job_id=604, finished=False)
    finished = make_job(store, job_id=605, finished=True, cluster="todi")
    settings.SATURATION_REFRESH_SECONDS = 0
    score_job_task.app.conf.task_always_eager = True
    try:
        assert sorted(score_recent_jobs_task()) == sorted([running.pk, finished.pk])
    finally:
        score_job_task.app.conf.task_always_eager = False
    assert TaskRun.objects.get(name="saturation.update_job").subject == "job alps/604"
    assert TaskRun.objects.get(name="saturation.score_job").subject == "job todi/605"
    assert JobSaturation.objects.get(job=running).status == "ready" == JobSaturation.objects.get(job=finished).status
    JobSaturation.objects.filter(job=running).update(scoring_since=timezone.now(), scoring_task=f"{SPLIT_PREFIX}x")
    assert score_recent_jobs_task() == []  # one scoring at a time per job; the finished one was scored to its end


# ---------------------------------------------------------------------------------------------
# On a real worker (tests/conftest.py: celery_worker_process), through the broker


@pytest.fixture
def default_store():
    """The store the worker process uses too (the test run's data folder)."""
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store

    reset_telemetry_stores()
    yield telemetry_store()
    reset_telemetry_stores()


def wait_for_run(scoring_id: str, worker, timeout: float = 180) -> TaskRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = TaskRun.objects.filter(name="saturation.score_blocks", celery_task_id=f"{SPLIT_PREFIX}{scoring_id}").first()
        if run is not None and run.status in ("succeeded", "failed"):
            return run
        time.sleep(0.3)
    raise AssertionError(f"the split scoring {scoring_id} did not end; worker log:\n{worker.log_text()[-3000:]}")


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_chord_of_node_blocks_on_the_worker_equals_scoring_in_one_task(celery_worker_process, default_store, settings):
    job = make_job(default_store, job_id=611, finished=True, cluster="split-a")
    single = snapshot(job_saturation_refresh(job))
    settings.SATURATION_SPLIT_MIN_NODES, settings.SATURATION_BLOCK_NODES = 4, 3
    result = score_job_task.apply(args=[job.pk]).get()  # here: it hands the job to the worker in 3 blocks
    assert result["status"] == "split", result
    assert JobSaturation.objects.get(job=job).scoring_task == f"{SPLIT_PREFIX}{result['scoring']}"
    run = wait_for_run(result["scoring"], celery_worker_process)
    assert run.status == "succeeded", run.message
    assert run.total == 4 and run.done == 4 and "3 blocks of 3" in run.log
    log = celery_worker_process.log_text()
    assert "saturation.score_block" in log and "saturation.merge_blocks" in log
    record = JobSaturation.objects.get(job=job)
    assert record.scoring_since is None and record.scoring_task == ""
    assert_same_result(snapshot(record), single)
    assert not split_folder(job, result["scoring"]).exists()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_block_that_fails_ends_the_split_scoring_with_the_reason_and_keeps_the_previous_score(
        celery_worker_process, default_store, settings):
    job = make_job(default_store, job_id=612, finished=False, cluster="split-b")
    previous = job_saturation_refresh(job)
    settings.SATURATION_BLOCK_NODES = 4
    scoring_id = "broken-block"
    (split_folder(job, scoring_id) / "block-0001.npz").mkdir(parents=True)  # block 1 cannot write its file
    assert start_split_scoring(job, reason="test", scoring_id=scoring_id) == scoring_id
    run = wait_for_run(scoring_id, celery_worker_process)
    assert run.status == "failed" and "node block" in run.message, run.message
    record = JobSaturation.objects.get(job=job)
    assert record.status == "ready" and record.score == previous.score
    assert record.scoring_since is None and "node block of the split scoring failed" in record.message
    assert not split_folder(job, scoring_id).exists()
