"""Freshness per ingestion source: the job records when each source (collector posts, imports, live DCGM
reads) last sent a sample for its nodes, and the telemetry panel and the first screen say it — live,
lagging or stale — without inventing anything when no source reported. Real store, real ingestion path
(samples_arrived), real pages."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.models import JobTelemetry
from apps.telemetry.selectors import forget_host_maps
from apps.telemetry.services import job_telemetry_refresh, samples_arrived

from .contract import synthetic

HOSTS = ("nid000001", "nid000002")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture(autouse=True)
def fresh_host_maps():
    forget_host_maps()
    yield
    forget_host_maps()


def make_job(*, ran_minutes=None, started_minutes_ago=120):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0, second=0) - timedelta(minutes=started_minutes_ago)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice",
                              account="a-llm01", state="RUNNING" if ran_minutes is None else "COMPLETED",
                              submit_time=start, start_time=start, gpus=8, node_count=2,
                              end_time=None if ran_minutes is None else start + timedelta(minutes=ran_minutes),
                              node_list=list(HOSTS), nodes="nid[000001-000002]")


def arrive(store, frame, source):
    store.write(frame)
    return samples_arrived(frame, source)


def page(client, job) -> str:
    response = client.get(f"/jobs/alps/{job.job_id}/")
    assert response.status_code == 200
    return response.content.decode()


def summary(client, job) -> str:
    response = client.get(f"/jobs/alps/{job.job_id}/summary/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_live_collector_and_a_stale_import_are_each_said_with_their_last_sample(client, alice, store):
    job = make_job()
    now = timezone.now().replace(microsecond=0)
    imported = synthetic(hosts=HOSTS, minutes=10, start=job.start_time)  # an import of the first 10 minutes
    assert arrive(store, imported, "dcgmi-dmon") == [job.pk]
    recent = synthetic(hosts=HOSTS, minutes=1, start=now - timedelta(seconds=80))  # the collector, 20 s ago
    assert arrive(store, recent, "samples") == [job.pk]
    job_telemetry_refresh(job)
    record = JobTelemetry.objects.get(job=job)
    assert set(record.sources) == {"dcgmi-dmon", "samples"}
    assert record.sources["samples"]["last"] == (now - timedelta(seconds=30)).isoformat()
    client.force_login(alice)
    text = page(client, job)
    panel = text[text.index('id="telemetry-sources"'):]
    panel = panel[:panel.index("</ul>")]
    collector, dmon = panel.index('data-source="samples"'), panel.index('data-source="dcgmi-dmon"')
    assert collector < dmon  # freshest first
    assert "freshness--live" in panel[collector - 80:collector] and "freshness--stale" in panel[dmon - 80:dmon]
    last = (now - timedelta(seconds=30))
    assert re.search(f'Collector posts: last sample <time datetime="{re.escape(last.isoformat())}">'
                     f'{last:%Y-%m-%d %H:%M:%S} UTC</time> \\(3[0-9] s ago\\)', panel), panel
    assert "Imports of dcgmi dmon output: last sample" in panel and "(1 h 5" in panel
    first = summary(client, job)
    # Its badge says live (30 s old, within a few page refreshes); the words give the time, not the verdict.
    assert re.search(r'status--ok">live</span> GPU telemetry from collector posts: [^<]*last sample', first), first
    assert "GPU telemetry from imports of dcgmi dmon output: no data since" in first and "freshness--stale" in first


def test_a_source_silent_for_minutes_lags(client, alice, store):
    job = make_job(started_minutes_ago=30)
    arrive(store, synthetic(hosts=HOSTS, minutes=5, start=job.start_time + timedelta(minutes=20)), "samples")
    client.force_login(alice)
    panel = page(client, job)
    assert 'freshness--lagging" data-source="samples"' in panel
    assert "GPU telemetry from collector posts: lagging since" in summary(client, job)


def test_no_source_no_data_says_so_and_lists_nothing(client, alice, store):
    job = make_job()
    client.force_login(alice)
    text = page(client, job)
    assert "No source (collector, import or live DCGM read) has sent samples for this job" in text
    assert 'data-source="' not in text
    first = summary(client, job)
    assert "GPU telemetry from" not in first and "no sample since the job started" in first


def test_data_that_never_passed_ingestion_is_not_called_silent(client, alice, store):
    job = make_job()
    store.write(synthetic(hosts=HOSTS, minutes=10, start=job.start_time))  # loaded into the store directly
    job_telemetry_refresh(job)
    client.force_login(alice)
    text = page(client, job)
    assert "No per-source times for this job" in text and "has sent samples" not in text


def test_a_finished_job_says_complete_or_ends_early_per_source(client, alice, store):
    job = make_job(ran_minutes=60, started_minutes_ago=70)
    job_telemetry_refresh(job)  # as beat did while it ran: ended jobs are found through their product's window
    arrive(store, synthetic(hosts=HOSTS, minutes=60, start=job.start_time), "samples")
    arrive(store, synthetic(hosts=HOSTS, minutes=20, start=job.start_time), "dcgm-exporter")
    client.force_login(alice)
    text = page(client, job)
    assert 'freshness--complete" data-source="samples"' in text
    assert 'freshness--ends-early" data-source="dcgm-exporter"' in text
    assert "ago)" not in text[text.index('id="telemetry-sources"'):text.index("</ul>", text.index('id="telemetry-sources"'))]
