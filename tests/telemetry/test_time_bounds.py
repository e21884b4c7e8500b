"""Issue 33, finding 3 (the class of 3d): every time the telemetry imports parse (a sample's ``ts``, an import's
``ts``) is between 2000 and 2200, or the request says which one is not. A time whose UTC falls past year 9999 was an
OverflowError, a 500 where only ValueError was caught, and one past 2262 made the store refuse the whole batch."""
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from apps.telemetry.ingest import parse_timestamp

BAD = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "2300-01-01T00:00:00Z", "1000-01-01T00:00:00Z"]
NOW = datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture
def service(db, make_user):
    user = make_user("collector", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_ingestbatch"))
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=user).key}"}


@pytest.mark.parametrize("value", [*BAD, -1e15, -1, 9e10, 9e13])
def test_the_parser_says_the_years_with_a_value_error(value):
    with pytest.raises(ValueError, match="between 2000 and 2200|before 1970"):
        parse_timestamp(value)


def test_the_parser_keeps_times_of_the_years_in_utc():
    assert parse_timestamp("2026-11-24T12:00:00+02:00") == datetime(2026, 11, 24, 10, tzinfo=timezone.utc)
    assert parse_timestamp(1795600000_000) == datetime.fromtimestamp(1795600000, tz=timezone.utc)


@pytest.mark.parametrize("ts", BAD)
def test_a_sample_outside_the_years_is_its_rows_error(api_client, service, store, ts):
    good = {"ts": (NOW - timedelta(minutes=1)).isoformat(), "host": "nid000001", "gpu": 0, "field": 1002, "value": 0.5}
    body = json.dumps([good, {**good, "ts": ts}]).encode()
    response = api_client.generic("POST", "/api/v1/telemetry/samples/?cluster=alps", body, content_type="application/json",
                                  **service)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1 and [(error["row"], error["field"]) for error in response.json()["errors"]] == [(1, "ts")]


@pytest.mark.parametrize("query", [f"format={kind}&cluster=alps&ts={ts}" for kind in ("lustre-jobstats", "fabric-manager")
                                   for ts in BAD])
def test_an_import_time_outside_the_years_is_a_400_naming_it(api_client, service, store, query):
    from urllib.parse import quote

    name, _, value = query.rpartition("&")[2].partition("=")
    url = f"/api/v1/telemetry/import/?{query.rsplit('&', 1)[0]}&{name}={quote(value)}"
    response = api_client.generic("POST", url, b"x", content_type="text/plain", **service)
    assert response.status_code == 400, response.content
    assert name in {error["field"] for error in response.json()["errors"]}, response.json()
