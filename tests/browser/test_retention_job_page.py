"""A job whose raw samples are past their retention, in headless Chromium (issue 40, acceptance 4): its telemetry and
saturation are built from the 1-minute rollups that still hold it, the heatmap draws them, and the page says so — in
the telemetry panel and on the first screen — instead of drawing empty figures. Screenshot:
test-artifacts/screenshots/retention-job-rollups.png."""
from datetime import timedelta

import pytest

from .session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]

HOSTS = [f"nid{n:06d}" for n in range(1, 5)]


@pytest.fixture
def expired_job(transactional_db, store, make_user):
    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.retention import Retention
    from apps.telemetry.services import job_telemetry_refresh
    from apps.telemetry.synthetic_jobs import job_chunks

    end = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    start = end - timedelta(minutes=45)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4041, user_name="alice",
                             account="a-llm01", name="megatron-last-month", state="COMPLETED", submit_time=start,
                             start_time=start, end_time=end, node_list=HOSTS, nodes="nid[000001-000004]", gpus=16)
    for chunk in job_chunks("megatron", HOSTS, start, 45 * 60, seed=5):
        store.write(chunk)
    moment = timezone.now() + timedelta(days=40)  # the store's clock: 40 days on, with the default tiers
    store.retention, store.clock = Retention(), (lambda: moment)
    assert store.expire(), "the job's raw day should be past its 30 days"
    telemetry, saturation = job_telemetry_refresh(job), job_saturation_refresh(job)
    assert telemetry.status == "ready" and telemetry.step_seconds == 60
    assert saturation.status == "ready" and saturation.score is not None
    make_user("alice", password="pw-for-tests-1")
    return job


def test_a_job_whose_raw_samples_expired_shows_its_rollups_and_says_so(live_server, page, expired_job, screenshot):
    log_in(page, live_server.url, "alice", "pw-for-tests-1", f"/jobs/alps/{expired_job.job_id}/")
    page.wait_for_url(f"**/jobs/alps/{expired_job.job_id}/")
    first = page.locator("#first-screen")
    assert "Raw samples of this job expired on" in first.inner_text()  # the verdict says it before the evidence
    notice = page.locator("#telemetry-retention")
    notice.scroll_into_view_if_needed()
    assert notice.is_visible() and notice.get_attribute("data-showing") == "rollups"
    text = notice.inner_text()
    assert "1-minute rollups (60 s buckets)" in text and "raw for 30 days, 1-min to 90 days, 10-min to 1 year" in text
    page.wait_for_selector("#telemetry-heatmap[data-rendered=true]", timeout=60_000)
    times = page.evaluate("document.getElementById('telemetry-heatmap').data[0].x")
    assert len(times) >= 40  # 45 minutes of 1-minute buckets, drawn
    section = page.get_by_role("region", name="GPU telemetry")
    assert "in 60 s buckets" in section.inner_text()
    path = screenshot(page, "retention-job-rollups")
    section.screenshot(path=str(path.with_name("retention-job-rollups-panel.png")))
    assert page.problems.take() == []
