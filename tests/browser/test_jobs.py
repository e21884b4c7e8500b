"""The job list and the demo's Megatron job in headless Chromium."""
import pytest

from .test_job_page import wait_until

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def demo_system(transactional_db):
    load_demo()


def log_in(page, base_url, username="demo", password="belvedere-demo"):
    page.goto(f"{base_url}/accounts/login/?next=/jobs/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/jobs/")


def test_filter_the_job_list_and_open_the_megatron_job(live_server, page, screenshot, demo_system):
    log_in(page, live_server.url)
    screenshot(page, "jobs-list-mine")
    page.get_by_label("Show").select_option("all")
    page.get_by_label("Running").check()
    page.get_by_label("Nodes from").fill("64")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/jobs/?*state=RUNNING*")
    assert "min_nodes=64" in page.url  # filters live in the URL, so the view can be shared
    rows = page.locator("table.jobs-table tbody tr")
    assert rows.count() >= 1
    for state in rows.locator("td:nth-child(5)").all_inner_texts():
        assert state.strip() == "Running"
    screenshot(page, "jobs-list-filtered")
    page.locator("table.jobs-table tr", has_text="megatron-gpt-175b-pretrain").get_by_role("link").first.click()
    page.wait_for_url("**/jobs/alps/*/")
    assert page.get_by_role("heading", level=1).inner_text().startswith("megatron-gpt-175b-pretrain")
    wait_until(page, "document.documentElement.dataset.jobPageReady === 'true'", timeout=60_000)
    assert page.locator("#first-screen").bounding_box()["y"] < 400  # the verdict comes first
    page.locator("#topology-figure").scroll_into_view_if_needed()  # the map loads when it comes into view
    page.wait_for_selector("#topology-figure[data-rendered=true]", timeout=60_000)
    placement = page.get_by_role("region", name="Placement")
    assert "Nodes\t128" in placement.inner_text() and "Groups\t2" in placement.inner_text()
    legend = page.locator("#topology-figure .legendtext").evaluate_all("items => items.map(item => item.textContent)")
    assert "this job's nodes (128)" in legend
    screenshot(page, "job-megatron")
    assert page.problems.take() == []


def test_another_users_job_is_not_found(live_server, page, demo_system):
    from apps.jobs.models import Job

    foreign = Job.objects.exclude(user_name="demo").exclude(account__in=["a-astro10", "a-bio06"]).first()
    log_in(page, live_server.url)
    response = page.goto(f"{live_server.url}/jobs/alps/{foreign.job_id}/")
    assert response.status == 404
    assert "nothing at this address" in page.content()
