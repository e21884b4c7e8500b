"""The saturation demo feeder hands live refresh the running jobs that were never scored, a few per tick, so the
system page and the triage inbox cover the demo's running jobs within minutes of ``make run``."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.demo import FeedContext
from apps.saturation import demo as saturation_demo


@pytest.mark.django_db
def test_each_tick_sends_the_unscored_running_jobs_biggest_first_and_never_a_scored_one(monkeypatch,
                                                                                      django_capture_on_commit_callbacks):
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    sent = []
    monkeypatch.setattr("apps.core.live.request_refresh", lambda pk, reason="", **kw: sent.append(pk))
    monkeypatch.setattr(saturation_demo, "FIRST_SCORES_PER_TICK", 2)
    now = timezone.now()
    cluster = Cluster.objects.create(name="alps")

    def job(job_id, gpus, state="RUNNING"):
        return Job.objects.create(cluster=cluster, job_id=job_id, user_name="u", state=state, gpus=gpus,
                                  start_time=now - timedelta(hours=1), end_time=None if state == "RUNNING" else now)

    small, big, scored, middle, ended = job(1, 4), job(2, 64), job(3, 128), job(4, 16), job(5, 256, "COMPLETED")
    JobSaturation.objects.create(job=scored, status="ready", computed=now, score=50.0)
    JobSaturation.objects.create(job=middle, status="waiting")  # a row without a score yet still counts
    fed = [small.pk, big.pk, scored.pk, middle.pk, ended.pk]
    context = FeedContext(seed=1, start=now - timedelta(minutes=1), end=now, origin=now, shared={"telemetry_jobs": fed})

    with django_capture_on_commit_callbacks(execute=True):
        assert saturation_demo.feed(context) == {"first_scores": 2}
    assert sorted(sent) == sorted([big.pk, middle.pk])  # the two biggest unscored running jobs
    JobSaturation.objects.filter(job=middle).update(computed=now, score=20.0)
    JobSaturation.objects.create(job=big, status="ready", computed=now, score=70.0)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert saturation_demo.feed(context) == {"first_scores": 1}
    assert sent == [small.pk]
    assert saturation_demo.feed(FeedContext(seed=1, start=now, end=now, origin=now)) == {"first_scores": 0}
