"""Issue 35, item 2: the job page's saturation verdict says "warming up" until the scoring sees the steady state start,
instead of calling a 3.5-minute-old job's warm-up score (S 13) low saturation."""
from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _job(steady_found):
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    now = timezone.now()
    start = now - timedelta(minutes=3, seconds=30)
    job = Job.objects.create(cluster=Cluster.objects.get_or_create(name="alps")[0], job_id=9301, name="megatron",
                             user_name="alice", account="a-llm01", state="RUNNING", submit_time=start, start_time=start,
                             gpus=8, node_list=["nid009301", "nid009302"])
    JobSaturation.objects.create(job=job, status="ready", computed=now, score=13.0, limiter="tensor", steady_found=steady_found,
                                 steady_start=start, scored_until=now, window_start=start, window_end=now,
                                 per_gpu=[{"host": "nid009301", "gpu": i, "busy": 0.45, "score": 13.0} for i in range(8)])
    return job


def test_a_job_warming_up_gets_no_verdict():
    from apps.saturation.panel import summary

    part = summary(_job(steady_found=False))
    (fact,) = [fact for fact in part.facts if fact.label == "Saturation"]
    assert fact.value == "warming up" and "no verdict" in fact.detail
    assert not [finding for finding in part.findings if "13 of 100" in finding.title or "low" in finding.title.lower()]


def test_once_steady_the_score_is_the_verdict():
    from apps.saturation.panel import summary

    part = summary(_job(steady_found=True))
    (fact,) = [fact for fact in part.facts if fact.label == "Saturation"]
    assert fact.value == "13 of 100"



@pytest.mark.parametrize("steady_found", [False, True])
def test_the_panel_of_a_job_warming_up_does_not_speak_of_its_steady_state(steady_found):
    """Seen on the ten-minute walk: the first screen said "warming up" while the GPU saturation panel said "In its
    steady state the job's busiest unit ran at 29 %"."""
    from django.template.loader import render_to_string

    job = _job(steady_found)
    record = job.saturation
    html = render_to_string("saturation/_job_section.html", {
        "job": job, "job_saturation": record, "saturation_warming_up": not steady_found,
        "saturation_limiter_words": "tensor cores", "saturation_stragglers": []})
    assert ("Warming up: the GPUs have not reached their steady state yet" in html) is not steady_found
    assert ("In its steady state the job's busiest unit ran at 13 %" in html) is steady_found
    from apps.saturation.panel import context

    assert context(job, type("R", (), {"GET": {}})())["saturation_warming_up"] is not steady_found
