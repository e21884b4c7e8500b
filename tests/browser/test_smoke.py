"""Log in as the demo users and visit every navigation page in headless Chromium."""
import pytest

from apps.core.navigation import NAVIGATION

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


@pytest.mark.django_db(transaction=True)
def test_staff_visits_every_navigation_page_without_errors(live_server, page, screenshot, celery_worker_process):
    load_demo()
    log_in(page, live_server.url, "staff", "belvedere-staff")
    page.wait_for_load_state("networkidle")
    assert page.get_by_role("heading", level=1).inner_text().startswith("Welcome")
    screenshot(page, "home")
    assert page.problems.take() == []

    nav = page.get_by_role("navigation", name="Main")
    for item in NAVIGATION:
        nav.get_by_role("link", name=str(item.label), exact=True).click()
        page.wait_for_load_state("networkidle")
        if item.key == "api":
            # Swagger UI draws itself after fetching the schema: wait for its title, not a fixed time.
            page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        else:
            page.locator("h1").first.wait_for(state="visible", timeout=30_000)
        if item.key == "staff":
            # The services table is filled from /readyz by the page's script.
            page.wait_for_selector("[data-readiness-overall].status--ok", timeout=30_000)
        screenshot(page, f"nav-{item.key}")
        assert page.problems.take() == [], f"problems on {item.key} page"
        if item.key != "api":
            assert_basic_accessibility(page, item.key)
        if item.key != "api":
            current = page.locator('nav[aria-label="Main"] [aria-current="page"]')
            assert current.get_attribute("data-nav") == item.key


def assert_basic_accessibility(page, where: str) -> None:
    """The checks a screen-reader user notices first; not a full audit."""
    assert page.locator("html").get_attribute("lang") == "en", where
    assert page.locator("h1").count() == 1, where
    assert page.locator("img:not([alt])").count() == 0, where
    assert page.locator("a.skip-link[href='#main']").count() == 1, where
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
                 .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).length"""
    )
    assert unlabelled == 0, where


@pytest.mark.django_db(transaction=True)
def test_pages_print_without_navigation(live_server, page, screenshot):
    load_demo()
    log_in(page, live_server.url, "demo", "belvedere-demo")
    page.emulate_media(media="print")
    assert not page.get_by_role("navigation", name="Main").is_visible()
    assert page.get_by_role("heading", level=1).is_visible()
    screenshot(page, "home-print")
    pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF")


@pytest.mark.django_db(transaction=True)
def test_researcher_sees_no_staff_link_and_works_on_a_phone(live_server, browser, screenshot, celery_worker_process):
    load_demo()
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    log_in(page, live_server.url, "demo", "belvedere-demo")
    assert page.locator('[data-nav="staff"]').count() == 0
    menu = page.get_by_role("button", name="Menu")
    assert menu.get_attribute("aria-expanded") == "false"
    assert not page.locator("#site-nav").is_visible()
    menu.click()
    assert menu.get_attribute("aria-expanded") == "true"
    assert page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs", exact=True).is_visible()
    screenshot(page, "home-phone")
    assert errors == []
    context.close()
