"""The system page in Chromium on a small seeded world: the map draws every node, the colouring switches in
place (no navigation) between S, limiter, stragglers and vetting, the histogram window toggles in place,
and another project's job stays unnamed."""
import pytest

from tests.browser.session import log_in
from tests.system.seed import OTHER_NAME, PASSWORD, build_world

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def world(transactional_db):
    return build_world()


def node_colours(page):
    return page.evaluate("() => document.getElementById('system-map').data[0].marker.color")


def test_system_page_switches_colouring_in_place(live_server, page, screenshot, world):
    log_in(page, live_server.url, "rita", PASSWORD, next_path="/system/")
    page.wait_for_url("**/system/")
    verdict = page.locator("#system-verdict")
    assert "2 of 3" in verdict.inner_text() and "own-train" in verdict.inner_text()
    page.wait_for_function("() => document.documentElement.dataset.systemPageReady === 'true'", timeout=60_000)
    assert page.evaluate("() => document.getElementById('system-map').data[0].x.length") == 24
    by_s = node_colours(page)
    page.evaluate("() => { window.__samePage = true; }")
    navigations = page.evaluate("() => performance.getEntriesByType('navigation').length")

    colourings = {}
    for mode, name, legend in [("limiter", "limiter", "tensor"), ("straggler", "stragglers", "straggler node"),
                               ("vetting", "vetting state", "suspect")]:
        page.get_by_role("button", name=name, exact=True).click()
        page.wait_for_function(f"() => document.getElementById('system-map').dataset.colour === '{mode}'", timeout=10_000)
        colourings[mode] = node_colours(page)
        assert legend in page.locator("#system-legend").inner_text()
    assert page.evaluate("() => window.__samePage === true")
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == navigations
    hosts = page.evaluate("() => document.getElementById('system-map').data[0].text.map(t => t.match(/<b>(.*?)<\\/b>/)[1])")
    straggler, suspect, free = hosts.index("nid000003"), hosts.index("nid000021"), hosts.index("nid000024")
    assert colourings["straggler"][straggler] != colourings["straggler"][hosts.index("nid000004")]
    assert colourings["vetting"][suspect] != colourings["vetting"][free]
    assert by_s[free] == colourings["limiter"][free]  # free nodes stay grey
    assert by_s[hosts.index("nid000001")] != by_s[hosts.index("nid000009")]  # S 61.3 and 20 differ in colour
    assert "vetting: suspect" in page.evaluate(f"() => document.getElementById('system-map').data[0].text[{suspect}]")

    page.wait_for_function("() => document.getElementById('system-histogram').dataset.window === '24h'", timeout=30_000)
    day = page.evaluate("() => document.getElementById('system-histogram').data[0].y")
    page.get_by_role("button", name="last 7 days").click()
    page.wait_for_function("() => document.getElementById('system-histogram').dataset.window === '7d'")
    assert page.evaluate("() => document.getElementById('system-histogram').data[0].y") != day  # the week holds the done job
    assert OTHER_NAME not in page.content()
    page.get_by_role("button", name="saturation S").click()
    page.wait_for_function("() => document.getElementById('system-map').dataset.colour === 's'")
    assert page.problems.take() == []
    screenshot(page, "system")
