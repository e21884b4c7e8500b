"""Each product's retention on the catalogue, in headless Chromium (issue 40, acceptance 4): the index says how long every
product is kept, and a telemetry product's page lists the store's tiers from settings — raw 14 days, 1-minute rollups 60,
10-minute rollups 400 (neither the defaults nor a product file's number) — with how far back each reaches. Screenshot:
test-artifacts/screenshots/catalog-retention.png."""
from datetime import datetime, timedelta, timezone

import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]

TIERS = "raw for 14 days, 1-min to 60 days, 10-min to 400 days"


@pytest.fixture
def fourteen_sixty_four_hundred(store_kept):
    return store_kept(14, 60, 400)


def test_the_catalogue_shows_each_products_retention(live_server, page, transactional_db, django_user_model, screenshot,
                                                      fourteen_sixty_four_hundred):
    from apps.catalog.services import load_catalog

    assert load_catalog().problems == []
    django_user_model.objects.create_user("keeper", password="keeper-pw")
    log_in(page, live_server.url, "keeper", "keeper-pw", "/catalog/")
    page.wait_for_url("**/catalog/")

    cards = page.locator("#products > li")
    expect(cards).to_have_count(9)
    kept = dict(zip(cards.evaluate_all("cards => cards.map(c => c.dataset.product)"),
                    page.locator("#products .product-card__retention").all_inner_texts()))
    for name in ("dcgm-device", "dcgm-profiling", "gpu-error-counters"):
        assert kept[name] == f"Kept: {TIERS}", (name, kept[name])
    assert kept["vetting-results"] == "Kept: 400 days"
    assert kept["slurm-jobs"] == "Kept: 400 days"
    assert kept["rank-layouts"] == "Kept: as long as its job"
    assert page.locator('#products > li[data-product="dcgm-profiling"] .product-card__retention').is_visible()
    screenshot(page, "catalog-retention-index")

    page.get_by_role("link", name="DCGM profiling metrics per GPU (in jobs)").click()
    page.wait_for_url("**/catalog/dcgm-profiling/")
    expect(page.locator("#product-retention dd")).to_have_text(TIERS)
    table = page.locator("#retention-tiers")
    table.scroll_into_view_if_needed()
    expect(table).to_be_visible()
    rows = [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]
    today = datetime.now(timezone.utc)
    reaches = [row[3] for row in rows]
    assert [row[:3] for row in rows] == [["Raw samples", "10 s, as sent", "14 days"], ["1-minute rollups", "1 min", "60 days"],
                                         ["10-minute rollups", "10 min", "400 days"]]
    for days, shown in zip((14, 60, 400), reaches):
        moment = datetime.strptime(shown, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
        assert abs(moment - (today - timedelta(days=days))) < timedelta(minutes=5), (days, shown)
    expect(page.locator("#retention-note")).to_contain_text(f"A read that starts before {reaches[0]} UTC needs a step that is a "
                                                            f"multiple of 60 s")
    page.locator("#schema-heading").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot(page, "catalog-retention")), full_page=True)
    assert page.problems.take() == []
