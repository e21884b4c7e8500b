"""The catalogue in Chromium on the demo: search, open a product, see its state and missing members, run its
sample query, and open the explorer with the pre-filled plot (a Dash app inside the portal)."""
import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.mark.django_db(transaction=True)
def test_search_a_product_its_missing_members_and_the_explorer(live_server, page, screenshot):
    from apps.catalog.models import CheckRun

    load_demo()
    planted = [group["member"] for group in CheckRun.objects.filter(product__name="dcgm-device", kind="coverage")
               .order_by("-ran").first().measured["missing"]]
    log_in(page, live_server.url, "staff", "belvedere-staff", "/catalog/")
    cards = page.locator("#products > li")
    expect(cards).to_have_count(9)
    states = dict(zip(cards.evaluate_all("cards => cards.map(c => c.dataset.product)"),
                      page.locator("#products .product-state").all_inner_texts()))
    assert states["dcgm-device"] == "Fresh" and states["gpu-error-counters"] == "Stale"
    assert states["slingshot-nic-counters"] == "Unknown"
    screenshot(page, "catalog-list")

    # --- search and filter ----------------------------------------------------------------------
    page.get_by_label("Search", exact=True).fill("power temperature")
    page.get_by_role("button", name="Filter").click()
    expect(cards).to_have_count(1)
    expect(cards.first).to_contain_text("DCGM device metrics per GPU")
    expect(cards.first).to_contain_text("open incident")
    screenshot(page, "catalog-search")
    page.get_by_label("Search", exact=True).fill("")
    page.get_by_label("State", exact=True).select_option("stale")
    page.get_by_role("button", name="Filter").click()
    expect(cards).to_have_count(1)
    expect(cards.first).to_contain_text("GPU error counters")
    page.get_by_label("State", exact=True).select_option("")
    page.get_by_label("Search", exact=True).fill("power")
    page.get_by_role("button", name="Filter").click()

    # --- the product: state at a glance, missing members, gaps, sample query ----------------------
    page.get_by_role("link", name="DCGM device metrics per GPU").click()
    expect(page.locator("#product-state")).to_have_text("Fresh")
    expect(page.locator("#product-as-of")).to_contain_text("As of ")
    expect(page.locator("#open-incidents")).to_contain_text("coverage since")
    missing = page.locator("#missing-members .member-list a")
    assert missing.all_inner_texts() == planted and len(planted) == 16
    expect(page.locator("#missing-members")).to_contain_text("all GPUs")
    page.wait_for_selector("#gap-timeline[data-rendered=true]", timeout=30_000)
    traces = page.evaluate("document.getElementById('gap-timeline').data.map(t => t.name)")
    assert "silent now" in traces
    page.locator("#run-sample").click()
    expect(page.locator("#sample-result")).to_contain_text("HTTP 200")
    expect(page.locator("#sample-result")).to_contain_text('"columns"')
    screenshot(page, "catalog-product")

    # --- the explorer, pre-filled with the product's query ---------------------------------------
    page.locator("#open-explorer").click()
    page.wait_for_url("**/catalog/explorer/?product=dcgm-device")
    frame = page.frame_locator("#explorer-frame")
    expect(frame.locator("#note")).to_contain_text("median, 10-90 % band and min-max across", timeout=60_000)
    expect(frame.locator("#plot .main-svg").first).to_be_visible()
    fields = frame.locator("#fields").inner_text()
    assert "power (W)" in fields and "temperature (°C)" in fields
    screenshot(page, "catalog-explorer")
    frame.locator("#hosts").fill(",".join(planted[:4]))
    frame.locator("#hosts").press("Enter")
    expect(frame.locator("#note")).to_contain_text("one line per host (4)", timeout=60_000)
    screenshot(page, "catalog-explorer-silent-nodes")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_a_researcher_explores_only_their_own_jobs(live_server, page, screenshot):
    load_demo()
    # Not staff: a node list is not enough (the explorer opens on their latest job unless nodes are named).
    log_in(page, live_server.url, "demo", "belvedere-demo", "/catalog/")
    page.goto(f"{live_server.url}/catalog/explorer/?product=dcgm-profiling&hosts=nid000001")
    frame = page.frame_locator("#explorer-frame")
    expect(frame.locator("#note")).to_contain_text("Choose one of your jobs", timeout=60_000)
    frame.locator("#hosts").fill("nid000002")
    frame.locator("#hosts").press("Enter")
    expect(frame.locator("#note")).to_contain_text("Choose one of your jobs")
    assert page.problems.take() == []
