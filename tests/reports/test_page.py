"""The report page renders its first answer from the same report as the API, for who is asking."""
import json

import pytest

from .test_api import world  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def embedded(response) -> dict:
    html = response.content.decode()
    start = html.index('<script id="report-data" type="application/json">') + len('<script id="report-data" type="application/json">')
    return json.loads(html[start:html.index("</script>", start)])


def test_the_page_embeds_the_callers_report(client, world):  # noqa: F811
    client.force_login(world["alice"])
    response = client.get("/reports/")
    assert response.status_code == 200
    report = embedded(response)
    assert [row["key"] for row in report["rows"]] == ["a-llm01"]
    assert report["downloads"]["csv"].startswith("/api/v1/reports/usage.csv?")
    html = response.content.decode()
    assert '<option value="a-bio06"' not in html  # another project is not offered
    assert html.index('id="report-verdict"') < html.index('id="report-filters"')  # the answer first


def test_a_preset_window_and_bad_parameters(client, world):  # noqa: F811
    client.force_login(world["staff"])
    day = embedded(client.get("/reports/", {"window": "24h"}))
    week = embedded(client.get("/reports/"))
    assert day["totals"]["jobs"] == 2 and week["totals"]["jobs"] == 3  # bob's job 30 h ago is outside 24 h
    response = client.get("/reports/", {"since": "not a date"})
    assert response.status_code == 200
    assert "since:" in response.content.decode() and embedded(response)["totals"]["jobs"] == 3  # the default window instead
    unknown = client.get("/reports/", {"project": "a-nope"})
    assert unknown.status_code == 200 and "a-nope" in unknown.content.decode()


def test_anonymous_is_sent_to_log_in(client, world):  # noqa: F811
    assert client.get("/reports/").status_code == 302
