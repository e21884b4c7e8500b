"""The job page's first screen tells the truth about its data: late starts, early stops, samples that stop
arriving while the job runs, and why a job has no score. Real store, real refresh and scoring, real page."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.services import job_telemetry_refresh
from tests.telemetry.contract import synthetic

HOSTS = ("nid000001", "nid000002")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


def make_job(*, state="RUNNING", started_minutes_ago=120, ran_minutes=None, job_id=7):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0, second=0) - timedelta(minutes=started_minutes_ago)
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    return Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a-llm01", state=state,
                              submit_time=start - timedelta(minutes=2), start_time=start, gpus=8, node_count=2,
                              end_time=None if ran_minutes is None else start + timedelta(minutes=ran_minutes),
                              node_list=list(HOSTS), nodes="nid[000001-000002]")


def first_screen(client, job) -> str:
    response = client.get(f"/jobs/alps/{job.job_id}/summary/")
    assert response.status_code == 200
    return response.content.decode()


def test_data_that_starts_late_is_said_on_the_first_screen(client, alice, store):
    job = make_job(state="COMPLETED", started_minutes_ago=240, ran_minutes=180)
    store.write(synthetic(hosts=HOSTS, minutes=60, start=job.start_time + timedelta(minutes=120)))
    job_telemetry_refresh(job)
    client.force_login(alice)
    text = first_screen(client, job)
    assert "Data starts at" in text and "2 h after the job started" in text
    assert "whole run" not in text


def test_finished_job_whose_data_stops_early_says_so(client, alice, store):
    job = make_job(state="COMPLETED", started_minutes_ago=240, ran_minutes=120)
    store.write(synthetic(hosts=HOSTS, minutes=75, start=job.start_time))
    job_telemetry_refresh(job)
    client.force_login(alice)
    text = first_screen(client, job)
    assert "ends early" in text and "45 min before the job ended" in text


def test_running_job_whose_samples_stopped_says_since_when(client, alice, store):
    job = make_job(state="RUNNING", started_minutes_ago=90)
    store.write(synthetic(hosts=HOSTS, minutes=30, start=job.start_time))  # nothing for the last hour
    job_telemetry_refresh(job)
    client.force_login(alice)
    text = first_screen(client, job)
    last = job.start_time + timedelta(minutes=30)  # the end of the last bucket with data; its date once it is another day
    last = last.strftime("%H:%M" if last.date() == job.start_time.date() else "%Y-%m-%d %H:%M")
    assert f"no data since {last} UTC" in text and "while the job runs" in text
    assert "8 of 8 GPUs reporting" in text
    page = client.get(f"/jobs/alps/{job.job_id}/").content.decode()
    assert "Check the collector" in page  # the finding with its one thing to do


def test_running_job_with_fresh_samples_is_live(client, alice, store):
    job = make_job(state="RUNNING", started_minutes_ago=20)
    store.write(synthetic(hosts=HOSTS, minutes=20, start=job.start_time))
    job_telemetry_refresh(job)
    client.force_login(alice)
    assert ">live</span>" in first_screen(client, job)


def test_gpus_that_never_reported_are_counted(client, alice, store):
    job = make_job(state="RUNNING", started_minutes_ago=20)
    store.write(synthetic(hosts=HOSTS, gpus=(0, 1, 2), minutes=20, start=job.start_time))
    job_telemetry_refresh(job)
    client.force_login(alice)
    text = first_screen(client, job)
    assert "6 of 8 GPUs reporting" in text and "2 of the job&#x27;s 8 GPUs sent no telemetry" in text


def test_job_without_profiling_fields_says_why_it_has_no_score(client, alice, store):
    job = make_job(state="COMPLETED", started_minutes_ago=60, ran_minutes=30)
    # power and temperature only: no DCGM profiling field and no utilisation, nothing the score can use
    store.write(synthetic(hosts=HOSTS, fields=(150, 155), minutes=30, start=job.start_time))
    from apps.saturation.models import JobSaturation
    from apps.saturation.tasks import score_job_task

    score_job_task.apply(args=[job.pk])  # the task as a worker runs it, in this process

    record = JobSaturation.objects.get(job=job)
    client.force_login(alice)
    text = first_screen(client, job)
    assert "no score" in text and "Scoring failed" in text
    assert record.message and record.message[:40] in text.replace("&#x27;", "'")


def test_finished_job_never_scored_does_not_say_yet(client, alice, store):
    job = make_job(state="COMPLETED", started_minutes_ago=3000, ran_minutes=60)
    client.force_login(alice)
    text = first_screen(client, job)
    assert "not scored yet" not in text.lower() and "no GPU telemetry reached the portal" in text
    assert "no sample stored" in text


@pytest.mark.parametrize("score, idle, said, not_said", [
    (13.0, 24, ["far from every roof", "24 idle GPUs pull it down"], ["Close to the tensor-core roof"]),
    (45.0, 0, ["runs at about 45 % of what it can sustain"], ["Close to the tensor-core roof", "far from every roof"]),
    (88.0, 0, ["Close to the tensor-core roof"], ["far from every roof"]),
])
def test_the_advice_fits_the_score(client, alice, score, idle, said, not_said):
    from apps.saturation.models import JobSaturation

    job = make_job(state="COMPLETED", started_minutes_ago=120, ran_minutes=60)
    JobSaturation.objects.create(job=job, status="ready", score=score, limiter="tensor", idle_gpus=idle,
                                 computed=timezone.now(), product="p.npz", labels=["latency-bound, low occupancy"])
    client.force_login(alice)
    text = first_screen(client, job)
    for words in said:
        assert words in text
    for words in not_said:
        assert words not in text
