"""Each product's retention on the catalogue (issue 40): telemetry products show the store's tiers from settings (never a
number of their own file), the others their file's retention or their job's; the API gives the tiers with their dates."""
import re
from datetime import datetime, timedelta, timezone

import pytest

from apps.catalog.definitions import ProductInvalid, load_product
from apps.catalog.selectors import product_get, product_retention
from apps.catalog.services import field_units, load_catalog
from tests.catalog.test_definitions import GOOD

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
TELEMETRY = ("dcgm-device", "dcgm-profiling", "gpu-error-counters")


@pytest.fixture
def tiers(store_kept):
    """The default store keeps raw samples 14 days, 1-minute rollups 60 and 10-minute rollups 400 (not the defaults,
    not the test profile's century), on a fixed clock."""
    store = store_kept(14, 60, 400)
    store.clock = lambda: NOW
    return store


def test_a_telemetry_file_may_not_declare_its_own_retention():
    with pytest.raises(ProductInvalid) as caught:
        load_product(GOOD + "retention: 90d\n", "demo-power.yaml", field_units=field_units())
    [problem] = caught.value.problems
    assert problem.path == "retention" and problem.line == 17
    assert "the store's tiers (settings TELEMETRY_RETENTION_RAW_DAYS" in problem.message
    # Other sources keep their own single retention.
    other = GOOD.replace("source: {kind: telemetry}", "source: {kind: model, model: vetting.VettingResult, time_field: time}")
    other = other.replace(", field: 155", "").replace("sampling_period: 60s", "sampling_period: 60s\nretention: 400d")
    assert load_product(other, "demo.yaml", field_units=field_units())["retention"] == 400 * 86400


@pytest.mark.django_db
def test_telemetry_products_show_the_stores_tiers_and_the_others_their_own(tiers):
    assert load_catalog().problems == []
    for name in TELEMETRY:
        kept = product_retention(product_get(name).definition)
        assert kept["text"] == "raw for 14 days, 1-min to 60 days, 10-min to 400 days"
        assert kept["seconds"] == 14 * 86400 and kept["store"] == "default"
        assert [(t["tier"], t["days"], t["since"]) for t in kept["tiers"]] == [
            ("raw", 14, NOW - timedelta(days=14)), ("1m", 60, NOW - timedelta(days=60)), ("10m", 400, NOW - timedelta(days=400))]
    assert [t["resolution_s"] for t in product_retention(product_get("dcgm-profiling").definition)["tiers"]] == [10, 60, 600]
    assert [t["resolution_s"] for t in product_retention(product_get("dcgm-device").definition)["tiers"]] == [60, 60, 600]
    outside = {name: product_retention(product_get(name).definition)
               for name in ("vetting-results", "slurm-jobs", "slingshot-nic-counters", "rank-layouts", "saturation-scores", "topology")}
    assert {name: kept["text"] for name, kept in outside.items()} == {
        "vetting-results": "400 days", "slurm-jobs": "400 days", "slingshot-nic-counters": "30 days",
        "rank-layouts": "as long as its job", "saturation-scores": "as long as its job", "topology": None}
    assert all(kept["tiers"] is None for kept in outside.values())


@pytest.mark.django_db
def test_a_store_that_cannot_be_built_is_said_not_guessed(tiers, settings):
    load_catalog()
    definition = dict(product_get("dcgm-device").definition, source={"kind": "telemetry", "store": "elsewhere"})
    kept = product_retention(definition)
    assert kept["tiers"] is None and kept["seconds"] is None
    assert kept["text"].startswith("by the telemetry store 'elsewhere', which cannot be read")


@pytest.mark.django_db
def test_the_api_gives_each_tier(tiers, api_client, make_user):
    load_catalog()
    api_client.force_authenticate(make_user("mia"))
    definition = api_client.get("/api/v1/catalog/products/dcgm-profiling/").json()["definition"]
    assert definition["retention"] == 14 * 86400
    assert definition["retention_tiers"] == [
        {"tier": "raw", "resolution_s": 10, "days": 14, "since": "2026-02-15T12:00:00Z"},
        {"tier": "1m", "resolution_s": 60, "days": 60, "since": "2025-12-31T12:00:00Z"},
        {"tier": "10m", "resolution_s": 600, "days": 400, "since": "2025-01-25T12:00:00Z"}]
    vetting = api_client.get("/api/v1/catalog/products/vetting-results/").json()["definition"]
    assert vetting["retention"] == 400 * 86400 and vetting["retention_tiers"] is None
    assert api_client.get("/api/v1/catalog/products/topology/").json()["definition"]["retention"] is None


@pytest.mark.django_db
def test_the_pages_show_each_products_retention(tiers, client, make_user):
    load_catalog()
    client.force_login(make_user("mia"))
    index = client.get("/catalog/").content.decode()
    cards = dict(re.findall(r'data-product="([a-z0-9-]+)".*?product-card__retention">Kept: (.*?)</p>', index, re.S))
    assert len(cards) == 9
    for name in TELEMETRY:
        assert cards[name] == "raw for 14 days, 1-min to 60 days, 10-min to 400 days"
    assert cards["vetting-results"] == "400 days" and cards["rank-layouts"] == "as long as its job"
    assert "not stated" in cards["topology"]

    page = client.get("/catalog/dcgm-device/").content.decode()
    assert '<dt>Kept</dt><dd>raw for 14 days, 1-min to 60 days, 10-min to 400 days</dd>' in page
    rows = re.findall(r'<tr data-tier="(\w+)"><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>', page)
    assert rows == [("raw", "Raw samples", "1 min, as sent", "14 days", "2026-02-15 12:00"),
                    ("1m", "1-minute rollups", "1 min", "60 days", "2025-12-31 12:00"),
                    ("10m", "10-minute rollups", "10 min", "400 days", "2025-01-25 12:00")]
    assert "A read that starts before 2026-02-15 12:00 UTC needs a step that is a multiple of 60 s" in page

    vetting = client.get("/catalog/vetting-results/").content.decode()
    assert "<dt>Kept</dt><dd>400 days</dd>" in vetting and 'id="retention-tiers"' not in vetting
