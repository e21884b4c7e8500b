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


def test_the_verdict_is_written_by_the_server(client, world):  # noqa: F811
    """The answer is in the HTML itself, not only after the script has run (it used to read 'Computing the report…')."""
    client.force_login(world["alice"])
    html = client.get("/reports/").content.decode()
    start = html.index('id="verdict-line">')
    verdict = " ".join(html[start:html.index("</p>", start)].split())
    # a-llm01: job 1 (8 GPUs, 4 h, S 50: 32 GPU-h, 16 lost) and job 2 (4 idle GPUs running 6 h: 24 GPU-h, all lost)
    assert "56 GPU-hours by 2 jobs" in verdict
    assert "mean saturation S 50 of 100" in verdict
    assert "40 GPU-hours lost, most by project a-llm01" in verdict
    assert "Computing" not in verdict


def test_after_a_bad_filter_the_downloads_are_of_the_report_shown(client, world):  # noqa: F811
    """The page falls back to the default report; its download links used to keep the refused filter (and answer 404)."""
    client.force_login(world["alice"])
    report = embedded(client.get("/reports/", {"project": "a-nope", "group_by": "user"}))
    assert [row["key"] for row in report["rows"]] == ["a-llm01"]  # the default report: per project, all of alice's
    link = report["downloads"]["csv"]
    assert "a-nope" not in link and "group_by=project" in link
    response = client.get(link)
    assert response.status_code == 200
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("group_by,key,") and lines[1].startswith("project,a-llm01,")


def test_the_low_saturation_mark_follows_the_sites_waste_threshold(client, world, settings):  # noqa: F811
    """The page and its script said 'below S 30' whatever WASTE_SCORE_BELOW was."""
    settings.WASTE_SCORE_BELOW = 55.0
    client.force_login(world["alice"])
    html = " ".join(client.get("/reports/").content.decode().split())
    assert 'data-low-s="55"' in html
    assert "Rows below S 55 (where triage calls a job wasteful) are marked." in html
