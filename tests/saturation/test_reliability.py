"""Scoring that is killed, repeated or left behind (issue 16 item 3): the previous score stays
readable, a message delivered again after it completed does not score twice, a message that keeps
killing its worker stops, and the sweeper ends scorings whose worker was lost."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import TaskRun
from apps.saturation.models import JobSaturation
from apps.saturation.services import job_saturation_refresh
from apps.saturation.tasks import score_job_task, sweep_stale_scoring_task

HOSTS = [f"nid{n:06d}" for n in range(1, 5)]


class Killed(BaseException):
    """Stands for the process dying: nothing after the raise point runs, no handler catches it."""


@pytest.fixture
def job(megatron_job):
    return megatron_job(job_id=77, hosts=HOSTS, minutes=40, seconds=2000, seed=3)


def test_a_scoring_that_dies_midway_leaves_the_previous_score_readable(job, api_client, make_user):
    previous = job_saturation_refresh(job)

    def die(done, message):
        if done >= 5:
            raise Killed

    with pytest.raises(Killed):
        job_saturation_refresh(job, report=die, task_id="abc")
    api_client.force_authenticate(make_user("alice"))
    response = api_client.get("/api/v1/jobs/alps/77/saturation/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["job_score"] == previous.score and body["scoring_since"] is not None
    heat = api_client.get("/api/v1/jobs/alps/77/saturation/heatmap/", {"bins": "10"})
    assert heat.status_code == 200 and len(heat.json()["rows"]) == len(previous.per_gpu)


def test_a_message_delivered_again_after_it_completed_does_not_score_twice(job):
    first = score_job_task.apply(args=[job.pk], task_id="same-message").get()
    assert first["status"] == "ready"
    computed = JobSaturation.objects.get(job=job).computed
    again = score_job_task.apply(args=[job.pk], task_id="same-message").get()
    assert again["status"] == "skipped"
    assert JobSaturation.objects.get(job=job).computed == computed
    assert TaskRun.objects.filter(name="saturation.score_job", status="succeeded").count() == 1


def test_a_message_that_keeps_killing_its_worker_stops_with_the_reason(job):
    previous = job_saturation_refresh(job)
    for _ in range(3):  # three deliveries whose worker died mid-run: their runs never finished
        TaskRun.objects.create(name="saturation.score_job", subject="job alps/77", celery_task_id="poison").start("scoring")
    JobSaturation.objects.filter(job=job).update(scoring_since=timezone.now(), scoring_task="poison")
    assert score_job_task.apply(args=[job.pk], task_id="poison").get()["status"] == "skipped"
    record = JobSaturation.objects.get(job=job)
    assert record.score == previous.score and record.status == "ready" and record.scoring_since is None
    assert "killed" in record.message
    runs = TaskRun.objects.filter(celery_task_id="poison")
    assert not runs.filter(status="running").exists()
    assert runs.filter(message__contains="killed 3 times").exists()


def test_the_sweeper_ends_stale_scorings_with_a_reason_and_queues_them_again(job, settings):
    previous = job_saturation_refresh(job)
    JobSaturation.objects.filter(job=job).update(scoring_since=timezone.now() - timedelta(hours=3), scoring_task="lost")
    settings.TASK_STALE_SECONDS = 3600
    score_job_task.app.conf.task_always_eager = True
    try:
        assert sweep_stale_scoring_task() == [job.pk]
    finally:
        score_job_task.app.conf.task_always_eager = False
    record = JobSaturation.objects.get(job=job)
    assert record.status == "ready" and record.scoring_since is None and record.computed > previous.computed
    runs = TaskRun.objects.filter(name="saturation.score_job", status="succeeded")
    assert runs.count() == 1
    # A scoring that is only running, not stale, is left alone.
    JobSaturation.objects.filter(job=job).update(scoring_since=timezone.now() - timedelta(minutes=5))
    assert sweep_stale_scoring_task() == []


def test_the_sweeper_says_why_a_never_scored_job_is_waiting(db, store):
    from apps.jobs.models import Cluster, Job

    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=78, user_name="a", account="a",
                             state="PENDING", submit_time=timezone.now(), node_list=[])
    JobSaturation.objects.create(job=job, scoring_since=timezone.now() - timedelta(hours=3), status="running")
    record = JobSaturation.objects.get(job=job)
    from django.test import override_settings

    with override_settings(TASK_STALE_SECONDS=3600):
        score_job_task.app.conf.task_always_eager = True
        try:
            assert sweep_stale_scoring_task() == [job.pk]
        finally:
            score_job_task.app.conf.task_always_eager = False
    record = JobSaturation.objects.get(job=job)
    # Queued again, it found the job not started: said so, and nothing left "Scoring".
    assert record.status == "waiting" and record.scoring_since is None and "not started" in record.message
    ended = TaskRun.objects.get(name="saturation.score_job")
    assert ended.status == "succeeded"


@pytest.mark.parametrize("params, field", [
    ({"bins": "²"}, "bins"), ({"bins": "6760759693754570375168"}, "bins"), ({"bins": "0"}, "bins"),
    ({"bins": "1e3"}, "bins"), ({"metric": "²"}, "metric"), ({"sort": "rank;drop"}, "sort"),
])
def test_heatmap_parameters_out_of_range_are_400s_naming_the_field(job, api_client, make_user, params, field):
    """Issue 16 item 6: ``bins=²`` passed ``str.isdigit()`` and ``int()`` raised: a 500."""
    job_saturation_refresh(job)
    api_client.force_authenticate(make_user("alice"))
    response = api_client.get("/api/v1/jobs/alps/77/saturation/heatmap/", params)
    assert response.status_code == 400, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]
