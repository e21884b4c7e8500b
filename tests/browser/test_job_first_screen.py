"""The job page's first screen in headless Chromium on the demo (issue 35, items 3 and 4, acceptance 2): a failed
job opens with how it ended and the likely cause, an unscored finished job says it is not scored yet (never
"has not started"), and on a phone (390 px) a healthy job's findings begin within its first two screens."""
import time

import pytest

from . import session

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PHONE = {"width": 390, "height": 844}


def wait_until(page, expression, timeout=60_000):
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(100)


@pytest.fixture
def staff_page(live_server, page, transactional_db, django_user_model):
    load_demo()
    django_user_model.objects.create_user("triage", password="triage-pw", is_staff=True)  # staff see every job
    session.log_in(page, live_server.url, "triage", "triage-pw", "/jobs/")
    page.wait_for_url("**/jobs/*")
    return page


def open_job(page, live_server, job, screenshot, name):
    page.goto(f"{live_server.url}/jobs/{job.cluster.name}/{job.job_id}/")
    wait_until(page, "document.documentElement.dataset.jobPageReady === 'true'")
    path = screenshot(page, name)
    page.screenshot(path=str(path.with_name(f"{name}-first-screen.png")), full_page=False)
    return page


def test_a_failed_job_opens_with_how_it_ended(live_server, staff_page, screenshot):
    from apps.jobs.models import Job

    job = Job.objects.filter(state="FAILED", exit_code__gt=0).exclude(start_time=None).order_by("-node_count").first()
    assert job is not None, "the demo has no failed job with an exit code"
    page = open_job(staff_page, live_server, job, screenshot, "job-failed")
    first = page.locator("#findings .finding").first
    assert first.get_attribute("class") == "finding finding--critical"
    words = first.inner_text()
    assert "The job failed" in words and f"exit code {job.exit_code}" in words and "Likely cause" in words
    assert first.bounding_box()["y"] < 800  # on the first screen, above everything else the page says
    assert "Nothing needs your attention" not in page.locator("#first-screen").inner_text()
    assert f"exit code {job.exit_code}" in page.locator("#fact-state").inner_text()
    assert page.problems.take() == []


def test_an_unscored_finished_job_says_it_is_not_scored_yet(live_server, staff_page, screenshot):
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    job = Job.objects.filter(state="CANCELLED").exclude(start_time=None).order_by("-end_time").first()
    JobSaturation.objects.update_or_create(job=job, defaults={"status": "waiting", "message": "the job has not started on any node yet",
                                                              "score": None, "product": ""})
    page = open_job(staff_page, live_server, job, screenshot, "job-unscored")
    text = page.locator("#first-screen").inner_text()
    assert "has not started" not in text and "Not scored yet: the job ended" in text
    assert "The job was cancelled" in page.locator("#findings .finding").first.inner_text()
    assert page.problems.take() == []


def test_on_a_phone_a_healthy_jobs_findings_begin_on_the_first_two_screens(live_server, staff_page, screenshot):
    from apps.jobs.models import Job

    staff_page.set_viewport_size(PHONE)
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    page = open_job(staff_page, live_server, job, screenshot, "job-phone")
    heading = page.locator("#findings-heading").bounding_box()
    first = page.locator("#findings .finding").first.bounding_box()
    assert heading["y"] < PHONE["height"] and first["y"] + 40 < 2 * PHONE["height"], (heading, first)
    assert page.locator("#fact-saturation").is_visible()  # the score stays on the first screen
    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    assert page.problems.take() == []
