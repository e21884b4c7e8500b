"""The notifications page in headless Chromium: the verdict first, a manager's switch saved in place (no reload)
through the API, and the verdict following it."""
import time

import pytest
from django.utils import timezone

from tests.browser.conftest import SCREENSHOTS, PageProblems
from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.problems = PageProblems(page)
    yield page
    context.close()


def wait_until(page, expression: str, timeout: float = 10_000) -> None:
    """Poll ``expression`` (the portal's CSP forbids wait_for_function's string evaluation)."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(100)


def test_a_manager_switches_mail_on_in_place(live_server, page, transactional_db, make_user, running_job):
    from apps.accounts.models import Membership
    from apps.notifications.models import NotificationSent, ProjectNotifications

    manager = make_user("mona", accounts=["a-llm01", "a-bio06"])
    manager.email = "mona@example.org"
    manager.save()
    Membership.objects.filter(user=manager, project__slurm_account="a-llm01").update(role="manager")
    job = running_job("a-bio06", "mona", 4242)
    NotificationSent.objects.create(job=job, reason="wasteful", status="sent", recipient="mona@example.org", user_name="mona",
                                    sent_at=timezone.now(), subject="[Belvedere] job alps/4242 (train-4242) wastes GPUs")

    log_in(page, live_server.url, "mona", "pw-for-tests-1", "/notifications/")
    page.wait_for_url(f"{live_server.url}/notifications/")
    verdict = page.locator("#verdict-line")
    assert "Mail is off for all your projects" in verdict.inner_text()
    assert page.locator("#notify-verdict").bounding_box()["y"] < page.locator("#notify-projects").bounding_box()["y"]
    rows = page.locator("#notify-projects tbody tr")
    assert rows.count() == 2
    # mona manages a-llm01 (switches) and is a member of a-bio06 (read only)
    assert page.locator("tr[data-account=a-bio06] form").count() == 0
    assert page.locator("tr[data-account=a-llm01] .notify-save").is_hidden()  # the script saves on change
    assert "alps/4242" in page.locator("#notify-sent").inner_text()
    page.evaluate("window.__sameDocument = true")

    page.locator("tr[data-account=a-llm01]").get_by_label("mail about wasteful jobs").check()
    wait_until(page, "document.querySelector('tr[data-account=a-llm01] .notify-state').textContent === 'saved'")
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("tr[data-account=a-llm01] .notify-changed").inner_text() == "mona just now"
    text = verdict.inner_text()
    assert "Mail is on for 1 of your 2 projects" in text and "a-llm01 (wasteful jobs)" in text and "1 other gets none" in text
    row = ProjectNotifications.objects.get(project__slurm_account="a-llm01")
    assert (row.waste, row.straggler, row.changed_by) == (True, False, "mona")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "notifications.png"), full_page=True)

    page.reload()
    assert "Mail is on for 1 of your 2 projects" in page.locator("#verdict-line").inner_text()
    assert page.locator("tr[data-account=a-llm01]").get_by_label("mail about wasteful jobs").is_checked()
    assert page.problems.take() == []
