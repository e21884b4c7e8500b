"""The per-job product lifecycle (apps/jobs/products.py): a product of a job is stale while the job runs and
its product ages, is built once more after the job ends, and one selector finds the stale products of
every kind (telemetry's cube, saturation's score)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.choices import JobProductStatusChoices
from apps.jobs.products import job_products, needs_refresh, product_window, stale_job_products, stale_products

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def test_the_rule_a_running_jobs_product_ages_an_ended_jobs_is_built_once_after_its_end():
    now = timezone.now()
    fresh = now - timedelta(minutes=5)
    assert needs_refresh(job_end=None, built=None, reaches=None, fresh_since=fresh)  # never built
    assert not needs_refresh(job_end=None, built=now, reaches=now, fresh_since=fresh)  # running, just built
    assert needs_refresh(job_end=None, built=now - HOUR, reaches=now - HOUR, fresh_since=fresh)  # running, aged
    end = now - timedelta(minutes=1)
    assert needs_refresh(job_end=end, built=now, reaches=end - timedelta(seconds=1), fresh_since=fresh)  # stops before the end
    assert not needs_refresh(job_end=end, built=now - HOUR, reaches=end, fresh_since=fresh)  # reaches the end: left alone
    assert needs_refresh(job_end=end, built=now, reaches=None, fresh_since=fresh)


def test_every_product_model_is_found_and_keeps_the_lifecycles_states():
    from apps.saturation.models import JobSaturation
    from apps.telemetry.models import JobTelemetry

    assert {JobSaturation, JobTelemetry} <= set(job_products())
    for model in job_products():
        assert {value for value, _ in model._meta.get_field("status").choices} == set(JobProductStatusChoices.values)


@pytest.fixture
def cluster():
    from apps.jobs.models import Cluster

    return Cluster.objects.create(name="alps")


def make_job(cluster, job_id, *, started, ended=None, state=None, nodes=("nid000001",)):
    from apps.jobs.models import Job

    now = timezone.now()
    return Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a",
                              state=state or ("RUNNING" if ended is None else "COMPLETED"),
                              submit_time=now - started - HOUR, start_time=now - started,
                              end_time=None if ended is None else now - ended, node_list=list(nodes))


def test_product_window_waits_for_the_job_to_start_on_nodes(cluster):
    running = make_job(cluster, 1, started=HOUR)
    window = product_window(running)
    assert window is not None and window[0] == running.start_time and window[1] > window[0]
    assert product_window(make_job(cluster, 2, started=HOUR, nodes=())) is None  # no nodes yet
    assert product_window(make_job(cluster, 3, started=-HOUR, state="PENDING")) is None  # a projected start
    instant = make_job(cluster, 4, started=HOUR, ended=HOUR, state="FAILED")  # ended at its start
    assert product_window(instant) is None
    ended = make_job(cluster, 5, started=2 * HOUR, ended=HOUR)
    assert product_window(ended) == (ended.start_time, ended.end_time)


def test_one_selector_finds_the_stale_products_of_both_kinds(cluster, settings):
    from apps.saturation.models import JobSaturation
    from apps.telemetry.models import JobTelemetry

    settings.TELEMETRY_REFRESH_SECONDS, settings.SATURATION_REFRESH_SECONDS, settings.TELEMETRY_RECENT_HOURS = 300, 600, 6
    now = timezone.now()
    never = make_job(cluster, 1, started=HOUR)  # running, no product of either kind yet
    fresh = make_job(cluster, 2, started=HOUR)
    aged = make_job(cluster, 3, started=HOUR)
    done = make_job(cluster, 4, started=2 * HOUR, ended=HOUR)
    short = make_job(cluster, 5, started=2 * HOUR, ended=HOUR)
    old = make_job(cluster, 6, started=3 * 24 * HOUR, ended=2 * 24 * HOUR)  # out of the recent range
    for model, built in ((JobTelemetry, "materialized"), (JobSaturation, "computed")):
        model.objects.create(job=fresh, status="ready", window_end=now, **{built: now - timedelta(minutes=4)})
        model.objects.create(job=done, status="ready", window_end=done.end_time, **{built: now - 2 * HOUR})
        model.objects.create(job=short, status="ready", window_end=short.end_time - timedelta(minutes=1), **{built: now})
    # Aged for saturation's period (10 min) only past telemetry's (5 min) too; a job being scored is left alone.
    JobTelemetry.objects.create(job=aged, status="ready", materialized=now - timedelta(minutes=7), window_end=now)
    JobSaturation.objects.create(job=aged, status="ready", computed=now - timedelta(minutes=7), window_end=now)
    being_scored = make_job(cluster, 7, started=HOUR)
    JobSaturation.objects.create(job=being_scored, scoring_since=now)

    found = stale_job_products(now)
    assert sorted(found["telemetry.JobTelemetry"]) == sorted([never.pk, aged.pk, short.pk, being_scored.pk])
    assert sorted(found["saturation.JobSaturation"]) == sorted([never.pk, short.pk])
    assert found["telemetry.JobTelemetry"] == stale_products(JobTelemetry, now=now)
    assert old.pk not in found["telemetry.JobTelemetry"] + found["saturation.JobSaturation"]

    # Built once after the end: the short product reaching the end now is left alone from then on.
    JobTelemetry.objects.filter(job=short).update(window_end=short.end_time)
    record = JobTelemetry.objects.get(job=short)
    assert not record.is_stale(short, now)
    assert short.pk not in stale_products(JobTelemetry, now=now + 2 * HOUR)  # still recent
    # While the job runs, the same product goes stale again as it ages.
    record = JobTelemetry.objects.get(job=fresh)
    assert not record.is_stale(fresh, now) and record.is_stale(fresh, now + timedelta(minutes=2))
