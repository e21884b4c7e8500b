"""Issue 23's catalogue in Chromium on the demo: the explorer's first plot has data (a researcher opens on their
latest job, staff on the machine with min-max bands), "Run it" answers 200 for a researcher, and incidents of
every product are acknowledged, assigned and resolved in place, with a subscription from the product page."""
import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

# Plotly's full data holds the decoded arrays (the figure sends numbers as typed binary arrays).
POINTS = ("el => el._fullData.map(t => [t.name || '', (t.x || []).length, Array.from(t.y || []).filter(v => v !== null && "
          "!Number.isNaN(v)).length]).filter(t => t[1] > 0)")


def first_plot(page) -> tuple[str, list]:
    """The explorer's note and its figure's traces ([name, points, values]) once the first plot is drawn."""
    frame = page.frame_locator("#explorer-frame")
    expect(frame.locator("#note")).to_contain_text("buckets of", timeout=60_000)
    graph = frame.locator("#plot .js-plotly-plot")
    return frame.locator("#note").inner_text(), graph.evaluate(POINTS)


@pytest.mark.django_db(transaction=True)
def test_a_researcher_opens_the_explorer_on_their_latest_job_and_runs_the_sample(live_server, page, screenshot):
    load_demo()
    log_in(page, live_server.url, "demo", "belvedere-demo", "/catalog/dcgm-device/")
    expect(page.locator("#sample-scope")).to_contain_text("your latest")
    expect(page.locator("#sample-query")).to_contain_text("job=")
    page.locator("#run-sample").click()
    expect(page.locator("#sample-result")).to_contain_text("HTTP 200", timeout=30_000)
    expect(page.locator("#sample-result")).to_contain_text('"columns"')
    screenshot(page, "catalog-run-it-researcher")

    page.locator("#open-explorer").click()
    note, traces = first_plot(page)
    assert traces and all(points > 0 and values > 0 for _, points, values in traces), (note, traces)
    assert "Choose one of your jobs" not in note and "rows read" in note
    job = page.frame_locator("#explorer-frame").locator("#job").inner_text()
    assert "alps/" in job, job  # the job it opened on is shown in its control
    screenshot(page, "catalog-explorer-researcher-first-plot")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_staff_open_the_explorer_on_the_machine_with_min_and_max(live_server, page, screenshot):
    load_demo()
    log_in(page, live_server.url, "staff", "belvedere-staff", "/catalog/explorer/?product=dcgm-device")
    note, traces = first_plot(page)
    names = [name for name, _, _ in traces]
    assert "power (W) min (silent = 0)" in names and "power (W) max" in names, names
    assert all(points > 0 for _, points, _ in traces)
    assert "silent at the end" in note and "hosts silent at the end" in note, note  # group 17's 16 silent nodes
    minimum = page.frame_locator("#explorer-frame").locator("#plot .js-plotly-plot").evaluate(
        "el => Array.from(el._fullData.find(t => t.name === 'power (W) min (silent = 0)').y).slice(-3)")
    assert 0 in minimum, minimum  # the silent nodes pull the minimum to zero
    screenshot(page, "catalog-explorer-staff-first-plot")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_incidents_of_every_product_are_handled_in_place(live_server, page, screenshot):
    from apps.catalog.models import Incident, IncidentSubscription

    load_demo()
    assert Incident.objects.filter(closed__isnull=True).exists()
    log_in(page, live_server.url, "staff", "belvedere-staff", "/catalog/incidents/")
    expect(page.locator("#incidents-verdict")).to_contain_text("nobody acknowledged yet")
    rows = page.locator("#incident-table tbody tr")
    first = rows.first
    incident = Incident.objects.get(pk=int(first.get_attribute("data-incident")))
    screenshot(page, "catalog-incidents-staff")
    page.evaluate("window.__stayed = true")  # lost if the page reloads
    first.get_by_role("button", name="Acknowledge").click()
    expect(first.locator("[data-field=state]")).to_have_text("acknowledged")
    expect(first.get_by_role("button", name="Acknowledge")).to_have_count(0)
    first.locator("select[data-action=assign]").select_option("staff")
    expect(first.locator("[data-field=assignee]")).to_have_text("staff")
    incident.refresh_from_db()
    assert incident.acknowledged is not None and incident.assignee.username == "staff"
    first.get_by_role("button", name="Resolve").click()
    expect(first.locator("[data-field=state]")).to_have_text("resolved")
    incident.refresh_from_db()
    assert incident.closed is not None and incident.resolved_by.username == "staff"
    assert page.evaluate("window.__stayed") is True
    screenshot(page, "catalog-incidents-handled")

    page.goto(f"{live_server.url}/catalog/{incident.product.name}/")
    page.locator("#subscribe").click()
    expect(page.locator("#subscribe")).to_have_text("Stop mailing me its incidents")
    assert IncidentSubscription.objects.filter(user__username="staff", product=incident.product).exists()
    screenshot(page, "catalog-product-subscribed")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_a_researcher_sees_incidents_but_no_actions(live_server, page):
    load_demo()
    log_in(page, live_server.url, "demo", "belvedere-demo", "/catalog/incidents/?state=all")
    expect(page.locator("#incident-table tbody tr").first).to_be_visible()
    expect(page.locator("[data-action]")).to_have_count(0)
    assert page.problems.take() == []
