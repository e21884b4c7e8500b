"""A job whose GPUs report utilisation only, in Chromium (issue 18, acceptance 4): the first screen says
"Limited score" with the busy time as its headline, and the saturation panel draws busy, clock and power
instead of S, with no error on the page."""
import pytest

from .conftest import SCREENSHOTS
from .session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def limited_job(transactional_db, store, make_user):
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.services import job_telemetry_refresh
    from apps.telemetry.synthetic_jobs import job_chunks

    hosts = [f"nid{n:06d}" for n in range(1, 5)]
    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice", account="a-llm01",
                             name="resnet-util-only", state="RUNNING", submit_time=start - timedelta(minutes=2),
                             start_time=start, node_list=hosts, node_count=4, gpus=16)
    for chunk in job_chunks("idle_gpus", hosts, start, 2340, seed=4):
        store.write(chunk[chunk["field"].isin((203, 100, 113, 150, 155))])
    job_telemetry_refresh(job)
    record = job_saturation_refresh(job)
    make_user("alice", password="pw-for-tests-1")
    return job, record


def test_limited_score_first_screen_and_panel(live_server, page, screenshot, limited_job):
    job, record = limited_job
    busy = [g["busy"] for g in record.per_gpu]
    headline = f"{100 * sum(busy) / len(busy):.0f} %"
    log_in(page, live_server.url, "alice", "pw-for-tests-1", f"/jobs/alps/{job.job_id}/")
    page.wait_for_url(f"**/jobs/alps/{job.job_id}/*")

    fact = page.locator("#fact-saturation")
    assert fact.locator(".fact__label").inner_text().lower() == "busy time (limited score)"  # CSS sets it in capitals
    assert fact.locator(".fact__value").inner_text() == headline
    assert "Limited score: these GPUs report utilisation only (no DCGM profiling fields)" in fact.inner_text()
    assert fact.is_visible()
    findings = page.locator("#findings").inner_text()
    assert "Enable the DCGM profiling metrics" in findings and "12 GPUs idle" in findings
    first_screen = SCREENSHOTS / "job-limited-score-first-screen.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(first_screen))  # the viewport: what a person sees first

    section = page.get_by_role("region", name="GPU saturation")
    for figure in ("saturation-heatmap", "saturation-bands"):
        page.locator(f"#{figure}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#{figure}[data-rendered=true]", timeout=60_000)
    assert page.locator("#saturation-heatmap").get_attribute("data-rendered-metric") == "busy"
    assert page.locator("#smetric").input_value() == "busy"
    text = section.inner_text()
    assert "Limited score" in text and "What it cannot tell" in text and "failed" not in text.lower()
    assert page.locator("#saturation-scatter").count() == 0  # no S to plot busy against
    bands = page.evaluate("document.getElementById('saturation-bands').data.map((trace) => trace.name || '')")
    assert "busy (utilisation): median" in bands
    page.locator("#saturation-limited").scroll_into_view_if_needed()
    section.screenshot(path=str(SCREENSHOTS / "job-limited-score-panel.png"))
    screenshot(page, "job-limited-score-page")
    assert page.problems.take() == []
