"""Vetting in Chromium on the demo: filter the history, open a node's timeline, act in triage."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_filters_a_node_timeline_and_a_triage_action(live_server, page, screenshot, transactional_db, settings):
    from apps.vetting.models import NodeHealth, NodeHealthEvent

    settings.VETTING_ACTIONS_DRY_RUN = True
    load_demo()
    log_in(page, live_server.url, "staff", "belvedere-staff", "/vetting/")
    page.wait_for_selector("#vetting-heatmap[data-rendered=true]", timeout=60_000)
    assert page.locator("#failure-rates tbody tr").count() >= 3

    # Filter: failed NCCL results of the last 14 days — all behind switch 5.0.
    page.get_by_label("Evaluation", exact=True).fill("nccl internode")
    page.get_by_label("Status", exact=True).select_option("bad")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*eval=nccl\+internode.*outcome=bad.*"))
    rows = page.locator("#vetting-results tbody tr")
    assert rows.count() >= 20
    switches = set(page.locator("#vetting-results tbody tr td:nth-child(3)").all_inner_texts())
    assert switches == {"5.0"}
    assert set(page.locator("#vetting-results tbody tr td:nth-child(4)").all_inner_texts()) == {"nccl internode"}
    screenshot(page, "vetting-history-filtered")

    # A node's timeline from the results.
    first_node = rows.first.locator("td:nth-child(2) a")
    host = first_node.inner_text()
    first_node.click()
    page.wait_for_url(f"**/vetting/nodes/{host}/")
    page.wait_for_selector("#node-timeline[data-rendered=true]", timeout=60_000)
    assert page.locator("#node-state").inner_text() == "suspect"
    traces = page.evaluate("document.getElementById('node-timeline').data.map(t => t.name)")
    assert "fail" in traces and "pass" in traces
    screenshot(page, "vetting-node-timeline")

    # Triage: the node DCGM asks to isolate is at the top; drain it with a reason (a dry run).
    page.goto(f"{live_server.url}/vetting/triage/")
    first = page.locator("#triage-nodes tbody tr").first
    critical_host = first.get_attribute("data-host")
    assert "critical" in first.inner_text() and "drain recommended" in first.inner_text()
    first.get_by_label(f"Reason for {critical_host}").fill("DCGM memory mismatch on GPU 1, isolate")
    first.get_by_role("button", name="drain").click()
    message = page.locator(".messages")
    # A dry run is what would run, shell-quoted; the node stays as it was (issue 16 item 11).
    expect(message).to_contain_text(f"{critical_host}: would drain (dry run: nothing changed in Slurm or here): scontrol update "
                                     f"NodeName={critical_host} State=DRAIN 'Reason=Belvedere: DCGM memory mismatch on GPU 1, isolate'")
    row = page.locator(f'#triage-nodes tr[data-host="{critical_host}"]')
    assert "drain recommended" in row.inner_text() and row.locator(".state--drained").count() == 0
    assert page.locator('.stats dt:text-is("drained") + dd').inner_text() == "0"
    screenshot(page, "vetting-triage-action")
    assert NodeHealth.objects.get(host=critical_host).state == "drain_recommended"
    assert NodeHealthEvent.objects.get(host=critical_host, action="drain", actor="staff").dry_run

    # The network coloured by vetting state.
    page.goto(f"{live_server.url}/topology/?color=vetting")
    page.wait_for_selector("[data-figure][data-rendered=true]", timeout=60_000)
    legend = page.evaluate("document.querySelector('[data-figure]').data.map(t => t.name)")
    assert any(name.startswith("in repair") for name in legend) and any(name.startswith("suspect") for name in legend)
    screenshot(page, "vetting-topology")
    assert page.problems.take() == []
