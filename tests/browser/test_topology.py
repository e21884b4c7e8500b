"""/topology/ in headless Chromium: the full reference system, and a highlighted node set."""
import pytest

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def demo_system(transactional_db):
    load_demo()


def log_in(page, base_url):
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


def test_full_system_renders_without_errors(live_server, page, screenshot, demo_system):
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/topology/")
    page.wait_for_selector("#topology-figure[data-rendered=true]", timeout=60_000)
    # One SVG point per node and per switch: 2,688 + 768.
    assert page.locator("#topology-figure .scatterlayer .point").count() == 2688 + 768
    assert page.locator("#topology-figure .annotation").count() == 24
    assert "2,688" in page.locator(".stats").inner_text()
    screenshot(page, "topology-system")
    assert page.problems.take() == []


def test_overlay_highlights_the_node_set_and_shows_its_placement(live_server, page, screenshot, demo_system):
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/topology/")
    page.get_by_label("Highlight nodes").fill("nid[000001-000056,000113-000120]")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**/topology/?nodes=*")
    page.wait_for_selector("#topology-figure[data-rendered=true]", timeout=60_000)
    legend = page.locator("#topology-figure .legendtext").evaluate_all("items => items.map(item => item.textContent)")
    assert "selected nodes (64)" in legend and "other nodes (2624)" in legend
    panel = page.get_by_role("region", name="Placement of the highlighted nodes")
    assert panel.is_visible()
    text = panel.inner_text()
    assert "Groups\t2" in text and "Nodes\t64" in text
    screenshot(page, "topology-overlay")
    # Clicking a highlighted node opens its page.
    page.locator("#topology-figure .scatterlayer .trace").first.locator(".point").first.click(force=True)
    page.wait_for_url("**/topology/nodes/nid*/", timeout=30_000)
    assert page.get_by_role("heading", level=1).inner_text().startswith("nid")
    screenshot(page, "topology-node")
    assert page.problems.take() == []


def test_bad_overlay_input_is_explained_not_an_error(live_server, page, demo_system):
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/topology/?nodes=nid[0001-")
    assert "is not a hostlist expression" in page.get_by_role("alert").inner_text()
    page.goto(f"{live_server.url}/topology/?nodes=nid424242")
    assert "not in the topology: nid424242" in page.get_by_role("alert").inner_text()
    assert page.problems.take() == []


def test_group_page_renders(live_server, page, screenshot, demo_system):
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/topology/groups/5/")
    page.wait_for_selector("#topology-figure[data-rendered=true]", timeout=60_000)
    assert page.locator("#topology-figure .scatterlayer .point").count() == 112 + 32
    screenshot(page, "topology-group")
    assert page.problems.take() == []
