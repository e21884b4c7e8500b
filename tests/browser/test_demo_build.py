"""The login page while make run builds the demo in the background: a progress bar that moves in place as the
build writes its progress (apps/core/demo_progress.py), and the logins once it is ready, without a reload."""
import pytest

from apps.core.demo_progress import ProgressFile

pytestmark = [pytest.mark.browser]

PARTS = {"accounts": 1, "topology": 1, "jobs": 1, "telemetry": 40, "network": 21, "catalog": 23}


@pytest.mark.django_db(transaction=True)
def test_the_login_page_follows_the_demo_build_in_place_and_shows_the_logins_when_ready(live_server, page, screenshot, settings,
                                                                                       tmp_path):
    settings.DEMO_PROGRESS_FILE = tmp_path / "demo-build.json"
    progress = ProgressFile(settings.DEMO_PROGRESS_FILE, parts=PARTS, seed=20261121)
    for name in ("accounts", "topology", "jobs"):
        progress.start(name)
        progress.finish(name, 0.5)
    progress.start("telemetry")

    page.goto(f"{live_server.url}/accounts/login/")
    banner = page.get_by_role("region", name="The demo system is being built")
    banner.wait_for()
    assert "Part 4 of 6 (telemetry)" in banner.inner_text()
    bar = page.locator("[data-demo-build-bar]")  # the same element all along (the region's name changes when ready)
    assert int(bar.get_attribute("value")) == 3  # 3 of 87 weights: the parts done so far are the small ones
    page.evaluate("document.body.dataset.probe = 'same page'")  # gone if the page reloads
    screenshot(page, "demo-build-progress")

    progress.finish("telemetry", 40.0)
    progress.start("network")
    banner.get_by_text("Part 5 of 6 (network)").wait_for(timeout=15_000)
    assert bar.evaluate("element => element.value") == round(100 * 43 / 87)

    progress.finish("network", 21.0)
    progress.start("catalog")
    progress.finish("catalog", 23.0)
    progress.ready()
    ready = page.get_by_role("region", name="The demo system is ready")
    ready.wait_for(timeout=15_000)
    logins = ready.locator("dl")
    assert logins.is_visible()
    text = logins.inner_text()
    assert "demo" in text and "belvedere-demo" in text and "staff" in text and "belvedere-staff" in text
    assert bar.evaluate("element => element.value") == 100
    assert page.evaluate("document.body.dataset.probe") == "same page"
    # The login form is still there to use, and nothing failed on the way.
    assert page.get_by_label("Username").is_visible()
    screenshot(page, "demo-build-ready")
    assert page.problems.take() == []
