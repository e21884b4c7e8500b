"""The job page's cache: a second visit is served without recomputing the panels, a new scoring shows at
once, and access is checked before anything is read from it."""
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.saturation.models import JobSaturation


@pytest.fixture
def cached(settings):
    from django.core.cache import cache

    settings.JOB_PAGE_CACHE_SECONDS = 60
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice", account="a-llm01",
                              state="COMPLETED", submit_time=start, start_time=start, end_time=start + timedelta(minutes=30),
                              node_list=["nid000001"], nodes="nid000001", gpus=4, node_count=1)


def test_a_second_visit_reads_the_cache_and_a_new_score_shows_at_once(cached, job, client, make_user):
    client.force_login(make_user("alice"))
    first = client.get("/jobs/alps/31/").content.decode()
    assert "no score" in first
    with CaptureQueriesContext(connection) as queries:
        again = client.get("/jobs/alps/31/").content.decode()
    tables = " ".join(query["sql"] for query in queries.captured_queries)
    assert "vetting" not in tables and "ranks" not in tables  # panels and first screen came from the cache
    unmask = lambda html: re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)  # noqa: E731 - masked per request
    assert unmask(again) == unmask(first)  # the same first screen, computed at the same moment
    JobSaturation.objects.create(job=job, status="ready", score=41.0, limiter="dram", computed=timezone.now(), product="x.npz")
    after = client.get("/jobs/alps/31/").content.decode()
    assert "41 of 100" in after and "memory bandwidth" in after  # the saturation panel is versioned


def test_access_is_checked_before_the_cache(cached, job, client, make_user):
    client.force_login(make_user("alice"))
    assert client.get("/jobs/alps/31/").status_code == 200
    assert client.get("/jobs/alps/31/summary/").status_code == 200
    client.force_login(make_user("bob"))  # another project: the cached page must not reach him
    assert client.get("/jobs/alps/31/").status_code == 404
    assert client.get("/jobs/alps/31/summary/").status_code == 404
