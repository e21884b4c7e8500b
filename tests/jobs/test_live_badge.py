"""The "live" badge on a running job's page (issue 35, item 6d): it showed on data minutes old (the telemetry
product's state stays "live" for its 5-minute re-read plus slack). "live" now only while the newest sample is
within a few of the page's refresh intervals (JOB_PAGE_LIVE_SECONDS), else "updated N min ago"; the words beside it
never say "live" themselves."""
import re
from datetime import datetime, timedelta, timezone as tz

import pytest
from django.utils import timezone

from apps.core.coverage import LIVE, LIVE_INTERVALS, badge, coverage

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=tz.utc)


def test_live_only_within_a_few_refresh_intervals_then_updated_n_min_ago():
    assert badge(LIVE, NOW - timedelta(seconds=20), NOW, 30).text == "live"
    assert badge(LIVE, NOW - timedelta(seconds=LIVE_INTERVALS * 30), NOW, 30).text == "live"
    old = badge(LIVE, NOW - timedelta(minutes=4), NOW, 30)
    assert old.text == "updated 4 min ago" and old.level == "info"
    assert badge(LIVE, NOW - timedelta(minutes=4), NOW, 120).text == "live"  # a page refreshed every 2 min
    assert badge("lagging", NOW - timedelta(minutes=8), NOW, 30).text == "lagging"
    assert badge("complete", NOW - timedelta(hours=3), NOW, 30).level == "ok"
    # A product re-read every 5 minutes is not lagging at 4 minutes: its state is live, its words do not say so.
    said = coverage(source="GPU telemetry", running=True, start=NOW - timedelta(hours=1), end=None,
                    first=NOW - timedelta(hours=1), last=NOW - timedelta(minutes=4), now=NOW, live_s=380)
    assert said.state == LIVE and "live" not in said.words and "(4 min ago)" in said.words


@pytest.mark.django_db
def test_the_first_screen_says_updated_n_min_ago_over_telemetry_minutes_old(client, make_user, store, settings):
    from apps.jobs.models import Cluster, Job
    from apps.telemetry.services import job_telemetry_refresh
    from tests.telemetry.contract import synthetic

    settings.JOB_PAGE_LIVE_SECONDS = 30
    start = timezone.now().replace(microsecond=0, second=0) - timedelta(minutes=30)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, gpus=8, node_count=2,
                             node_list=["nid000001", "nid000002"], nodes="nid[000001-000002]")
    store.write(synthetic(minutes=26, start=start))  # the newest sample about 4 minutes old
    job_telemetry_refresh(job)
    client.force_login(make_user("alice"))
    first = client.get("/jobs/alps/31/summary/").content.decode()
    item = re.search(r'<span class="status status--(\w+)">([^<]+)</span> GPU telemetry:', first)
    assert item, first
    assert item.group(2) in ("updated 4 min ago", "updated 5 min ago") and item.group(1) == "info"
    assert ">live</span>" not in first
