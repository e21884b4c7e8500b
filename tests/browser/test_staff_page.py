"""The staff page opens with what waits, each count a link to its list (issue 23), and its task table stays
inside its card, on a laptop and on a phone."""
import pytest

from apps.core.waiting import Waiting, register_waiting, unregister_waiting

from tests.browser.session import log_in
from tests.browser.test_narrow import overflow_on

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def broken(request):
    raise TimeoutError("the incident store did not answer in 2 s")


ENTRIES = (
    Waiting(key="test-approvals", label="namespace requests to approve", order=901, url_name="core:home",
            url_query="?waiting=approvals", count=lambda request: 3),
    Waiting(key="test-triage", label="triage items", order=902, url_name="core:home", count=lambda request: 0),
    Waiting(key="test-incidents", label="open incidents", order=903, url_name="core:home", count=broken),
)


@pytest.fixture
def waiting_entries():
    """Counts of our own: the live server runs in this process, so the registry it reads is this one."""
    for entry in ENTRIES:
        register_waiting(entry)
    yield ENTRIES
    for entry in ENTRIES:
        unregister_waiting(entry.key)


@pytest.fixture
def staff_with_work(make_user):
    from apps.core.models import TaskRun

    make_user("boss", password="pw-for-tests-1", is_staff=True)
    TaskRun.objects.create(name="catalog.check_product", subject="product slingshot-nic-counters on cluster alps",
                           status="failed", done=3, total=7,
                           message="schema check failed: column rx_bytes_per_second_on_every_port_of_every_switch_"
                                   "in_group_17_and_its_neighbours is missing from the sample")
    TaskRun.objects.create(name="jobs.sync_cluster", subject="cluster alps", status="succeeded", message="412 jobs")
    TaskRun.objects.create(name="vetting.import", subject="vetnode run 2026-11-26T17:00", status="running",
                           done=1, total=4)


def edge(page, selector: str) -> float:
    return page.evaluate(f"() => document.querySelector({selector!r}).getBoundingClientRect().right")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                         ids=["laptop", "phone"])
def test_staff_page_opens_with_what_waits(live_server, browser, screenshot, waiting_entries, staff_with_work, viewport):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        log_in(page, live_server.url, "boss", "pw-for-tests-1", "/staff/")
        page.wait_for_url(f"{live_server.url}/staff/")
        page.wait_for_load_state("networkidle")
        # What waits comes first: the first section after the title.
        first = page.locator("main section").first
        assert first.get_attribute("id") == "waiting"
        verdict = first.locator(".verdict").inner_text()
        assert "3 namespace requests to approve" in verdict and "open incidents" in verdict.split("Unknown:")[1]
        approvals = first.locator('[data-waiting="test-approvals"]')
        assert approvals.locator(".waiting-item__count").inner_text() == "3"
        assert "waiting-item--some" in approvals.get_attribute("class")
        assert first.locator('[data-waiting="test-triage"] .waiting-item__count').inner_text() == "0"
        incidents = first.locator('[data-waiting="test-incidents"]')
        assert incidents.locator(".waiting-item__count").inner_text() == "unknown"
        assert "did not answer in 2 s" in incidents.inner_text()
        # One vocabulary: the task states read "Failed", "Succeeded", "Running", each in its colour.
        states = page.locator(".task-runs .status").all_inner_texts()
        assert sorted(states) == ["Failed", "Running", "Succeeded"]
        assert page.locator('.task-runs .status[data-state="failed"]').get_attribute("class") == "status status--fail"
        # The task table stays inside its card: wrapped, or scrolled inside the card.
        card = "section[aria-labelledby=tasks-heading]"
        scroller = "section[aria-labelledby=tasks-heading] .table-scroll"
        assert edge(page, ".task-runs") <= edge(page, card) + 1 or edge(page, scroller) <= edge(page, card) + 1
        assert overflow_on(page) == [], overflow_on(page)
        name = "staff-page" if viewport["width"] > 400 else "staff-page-phone"
        screenshot(page, name)
        # Each count opens its list.
        approvals.get_by_role("link").click()
        page.wait_for_url(f"{live_server.url}/?waiting=approvals")
    finally:
        context.close()
