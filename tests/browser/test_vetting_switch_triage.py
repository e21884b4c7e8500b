"""Vetting at the right level, in Chromium on the demo (issue 23): the suspect switch is one triage row with its nodes
and one action; its dry run says "would drain N nodes" and touches no node's state, badge or counter (on the vetting
triage page and in the staff inbox); the history's filter bar is a grid across a wide screen; result rows say which
GPU and rank; the labels of a node's health changes never overlap."""
import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

WIDE = {"width": 1400, "height": 900}


def _health():
    from apps.vetting.models import NodeHealth, Recommendation

    return (sorted(NodeHealth.objects.values_list("host", "state", "since", "reason", "drained_by_belvedere")),
            sorted(Recommendation.objects.values_list("pk", "status")))


def _overlaps(boxes: list[dict]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes) if i < j
            and a["left"] < b["right"] - 0.5 and b["left"] < a["right"] - 0.5 and a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5]


def test_the_suspect_switch_is_one_row_and_its_dry_run_changes_nothing(live_server, page, screenshot, transactional_db, settings):
    from apps.triage.services import triage_sync
    from apps.vetting.models import NodeHealthEvent, Recommendation

    settings.VETTING_ACTIONS_DRY_RUN = True
    load_demo()
    [finding] = Recommendation.objects.filter(status="open", subject_kind="switch")
    hosts = sorted(finding.hosts)
    assert len(hosts) >= 4
    page.set_viewport_size(WIDE)
    log_in(page, live_server.url, "staff", "belvedere-staff", "/vetting/triage/")
    page.wait_for_url("**/vetting/triage/")

    rows = page.locator("#triage-switch-table tr.switch-row")
    expect(rows).to_have_count(1)
    row = rows.first
    assert row.get_attribute("data-switch") == finding.subject
    assert sorted(row.locator(".switch-nodes li").evaluate_all("items => items.map(li => li.dataset.host)")) == hosts
    # the switch's suspect nodes are not rows of their own
    listed = set(page.locator("#triage-nodes tbody tr").evaluate_all("rows => rows.map(r => r.dataset.host)"))
    suspects = {host for host in hosts if row.locator(f'li[data-host="{host}"]').get_attribute("data-state") == "suspect"}
    assert suspects and not listed & suspects
    drainable = int(row.get_attribute("data-drainable"))
    button = row.get_by_role("button", name=f"Dry run: drain {drainable} node{'s' * (drainable != 1)}")
    expect(button).to_be_visible()
    expect(row.locator(".switch-drain-real")).to_have_count(0)  # actions are dry runs here: no real drain offered

    before, stats = _health(), page.locator(".stats").inner_text()
    events = NodeHealthEvent.objects.count()
    page.evaluate("window.__marker = 1")
    row.get_by_label(f"Reason for switch {finding.subject}").fill("NCCL below 15 GB/s behind the switch in every run")
    button.click()
    message = row.locator("[data-role=message]")
    expect(message).to_contain_text(f"switch {finding.subject}: would drain {drainable} nodes")
    expect(message).to_contain_text("dry run: nothing changed in Slurm or here")
    assert page.evaluate("window.__marker") == 1  # in place, no reload
    assert _health() == before  # NodeHealth and the recommendations as they were
    assert NodeHealthEvent.objects.count() == events + drainable
    assert page.locator(".stats").inner_text() == stats
    assert row.locator(".state--drained").count() == 0 and page.locator("#triage-nodes .state--drained").count() == 0
    page.reload()
    assert page.locator(".stats").inner_text() == stats and page.locator("#triage-nodes .state--drained").count() == 0
    row = page.locator("#triage-switch-table tr.switch-row").first
    row.get_by_label(f"Reason for switch {finding.subject}").fill("NCCL below 15 GB/s behind the switch in every run")
    row.get_by_role("button", name=f"Dry run: drain {drainable} nodes").click()
    row.locator("[data-role=message] summary").click()
    expect(row.locator(".switch-commands")).to_contain_text(f"scontrol update NodeName={hosts[0]} State=DRAIN")
    row.scroll_into_view_if_needed()
    screenshot(page, "vetting-triage-switch-dry-run")
    assert page.problems.take() == []

    # The staff inbox: one item for the switch, its nodes listed, one dry-run action for all of them.
    triage_sync()
    page.goto(f"{live_server.url}/staff/triage/?kind=bad_switch")
    item = page.locator("li.triage-item[data-kind=bad_switch]")
    expect(item).to_have_count(1)
    assert sorted(item.locator(".triage-hosts li").evaluate_all("items => items.map(li => li.dataset.host)")) == hosts
    page.goto(f"{live_server.url}/staff/triage/")
    for host in suspects:
        expect(page.locator("li.triage-item[data-kind=failing_node]", has_text=f"{host}:")).to_have_count(0)
    item = page.locator("li.triage-item[data-kind=bad_switch]")
    item.locator("button.triage-drain").click()
    expect(item.locator("[data-role=message]")).to_contain_text(f"would drain {drainable} nodes")
    assert _health() == before
    item.scroll_into_view_if_needed()
    screenshot(page, "triage-inbox-switch-dry-run")
    assert page.problems.take() == []


def test_filter_bar_gpu_rank_and_timeline_labels(live_server, page, screenshot, transactional_db, settings):
    from datetime import timedelta

    from django.db.models import Count

    from apps.vetting.models import NodeHealthEvent

    load_demo()
    page.set_viewport_size(WIDE)
    log_in(page, live_server.url, "staff", "belvedere-staff", "/vetting/")
    page.wait_for_url("**/vetting/")
    page.wait_for_selector("#vetting-heatmap[data-rendered=true]", timeout=60_000)

    # The filter bar: its 11 inputs in a few rows across the page, several on one row.
    boxes = page.locator("#vetting-filters .filters__grid").locator("input, select").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); return {top: Math.round(r.top), left: r.left, width: r.width}; })")
    assert len(boxes) == 11
    rows: dict[int, int] = {}
    for box in boxes:
        rows[box["top"]] = rows.get(box["top"], 0) + 1
    assert max(rows.values()) >= 5 and len(rows) <= 3, rows
    form = page.locator("#vetting-filters").bounding_box()
    assert form["width"] > 1000 and form["height"] < 260, form

    # Result rows say which GPU and rank: no two rows of a page look alike.
    header = page.locator("#vetting-results thead th").all_inner_texts()
    assert "GPU / RANK" in [text.upper() for text in header]
    column = [text.upper() for text in header].index("GPU / RANK") + 1
    cells = page.locator(f"#vetting-results tbody td:nth-child({column})").all_inner_texts()
    assert cells and all(cell.strip() for cell in cells) and any("rank" in cell for cell in cells)
    seen = page.locator("#vetting-results tbody tr").evaluate_all(
        "rows => rows.map(r => [1, 2, 4, 5, 6].map(i => r.children[i - 1].innerText).join('|'))")
    assert len(seen) == len(set(seen))
    page.locator("#vetting-filters").scroll_into_view_if_needed()
    screenshot(page, "vetting-filter-bar")

    # A node whose health changed several times at one moment: its labels stacked, none over another.
    host = (NodeHealthEvent.objects.filter(dry_run=False).values("host").order_by().annotate(n=Count("id"))
            .order_by("-n").values_list("host", flat=True).first())
    assert NodeHealthEvent.objects.filter(host=host, dry_run=False).count() >= 2
    # and two earlier changes, days apart: close enough on a 90-day axis that their labels would run into the others'
    latest = NodeHealthEvent.objects.filter(host=host).order_by("-created").first().created
    for days, state in ((2, "drain_recommended"), (4, "suspect")):
        event = NodeHealthEvent.objects.create(host=host, from_state="healthy", to_state=state, action="rule", actor="rule:test",
                                               reason="an earlier change")
        NodeHealthEvent.objects.filter(pk=event.pk).update(created=latest - timedelta(days=days))
    page.goto(f"{live_server.url}/vetting/nodes/{host}/")
    page.wait_for_selector("#node-timeline[data-rendered=true]", timeout=60_000)
    labels = page.locator("#node-timeline g.annotation").evaluate_all(
        "gs => gs.map(g => { const r = g.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, text: g.textContent}; })")
    texts = " ".join(label["text"] for label in labels)
    assert len(labels) == 3 and "in repair" in texts and "drained" in texts, labels
    assert len({round(label["top"]) for label in labels}) == 3  # stacked: each on a lane of its own
    assert _overlaps(labels) == []
    plot = page.locator("#node-timeline .plot-container").bounding_box()
    assert all(label["top"] >= plot["y"] - 1 for label in labels)  # inside the figure, not cut off at its top
    page.locator("#node-timeline").scroll_into_view_if_needed()
    screenshot(page, "vetting-node-timeline-labels")
    assert page.problems.take() == []
