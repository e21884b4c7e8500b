"""Ranks on the demo Megatron job: no layout, sizes only, the exact map; selections and colourings
redrawn in place (no navigation, zoom kept), bad selections explained, and the form without JavaScript."""
import pytest

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def megatron(transactional_db):
    from apps.jobs.models import Job
    from apps.saturation.colourings import register

    register()  # what SaturationConfig.ready() does; idempotent
    load_demo()
    return Job.objects.get(name="megatron-gpt-175b-pretrain")


def log_in_and_open(page, base_url, job, query=""):
    page.goto(f"{base_url}/accounts/login/?next=/jobs/alps/{job.job_id}/{query}")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/jobs/alps/{job.job_id}/*")


def legend_of(page, figure_id):
    page.locator(f"#{figure_id}").scroll_into_view_if_needed()  # figures load when they come near the viewport
    page.wait_for_selector(f"#{figure_id}[data-rendered=true]", timeout=60_000)
    return page.locator(f"#{figure_id} .legendtext").evaluate_all("items => items.map(item => item.textContent)")


def redrawn(page, before: str):
    """Wait until the figure was drawn again after ``before`` (its rankmap:drawn count)."""
    page.wait_for_function(f"() => (window.__rankDraws || 0) > {before}", timeout=60_000)


def figure_shot(page, name: str) -> None:
    """The rank map alone, next to the full-page screenshots (test-artifacts/screenshots/)."""
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#rank-figure").screenshot(path=str(SCREENSHOTS / f"{name}-map.png"))


def count_draws(page):
    page.evaluate("""() => { window.__rankDraws = 0; window.__sameDocument = true;
        document.getElementById('rank-figure').addEventListener('rankmap:drawn', () => { window.__rankDraws += 1; }); }""")


def test_path_0_no_layout_shows_the_nodes_and_how_to_add_one(live_server, page, screenshot, megatron):
    megatron.layout.delete()
    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    assert "does not know this job's Megatron layout yet" in section.inner_text()
    assert section.locator("pre.command").count() == 3 and section.locator("details[open]").count() == 1
    assert section.locator("#rank-figure").count() == 0
    assert "this job's nodes (128)" in legend_of(page, "topology-figure")  # the nodes, in one colour
    screenshot(page, "ranks-path0")
    assert page.problems.take() == []


def test_path_1_sizes_colour_nodes_by_stage_and_select_replica_1_stages_7_8_in_place(live_server, page, screenshot, megatron):
    from apps.ranks.selectors import job_ranks

    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    assert "TP 4 × PP 8 × DP 16" in section.inner_text() and "block distribution" in section.inner_text()
    legend = legend_of(page, "rank-figure")
    # 16 nodes per stage, 4 ranks each: the legend counts ranks.
    assert [f"pp {stage} (64 ranks)" for stage in range(8)] == [name for name in legend if name.startswith("pp ")]
    spans = section.locator("#rank-spans tr[data-kind=tp]").inner_text()
    assert "All 128 groups stay inside one node: NVLink only." in spans
    screenshot(page, "ranks-path1-by-stage")
    figure_shot(page, "ranks-path1-by-stage")

    # "Stages 7 and 8" (1-based) of replica 1 = pp 6 and 7; the map redraws without a page load.
    count_draws(page)
    address = page.url
    section.get_by_label("Replicas (dp)").fill("1")
    section.get_by_label("Stages (pp)").fill("6,7")
    section.get_by_role("button", name="Show").click()
    redrawn(page, "0")
    assert page.evaluate("() => window.__sameDocument") is True  # no navigation
    assert "sel_dp=1" in page.url and "sel_pp=6%2C7" in page.url and page.url != address  # the address follows
    legend = legend_of(page, "rank-figure")
    ranks = job_ranks(megatron)
    chosen = ranks.table.select(dp=[1], pp=[6, 7])
    expected_hosts = {ranks.table.hosts[r] for r in chosen}
    assert len(chosen) == 8 and len(expected_hosts) == 2  # TP=4 fills a node: one node per stage
    assert "selected ranks (8)" in legend and "other ranks (504)" in legend
    assert "8 ranks selected" in section.inner_text()
    # The two selected nodes are exactly those ranks' nodes: read them from the figure itself.
    selected = page.evaluate("""() => {
        const figure = document.getElementById('rank-figure');
        const trace = figure.data.find(t => t.name.startsWith('selected ranks'));
        return trace.customdata.map(point => point[0]);
    }""")
    assert set(selected) == expected_hosts
    # Hovering a node tells which ranks it runs, with their coordinates.
    notes = page.evaluate("""() => document.getElementById('rank-figure').data
        .find(t => t.name.startsWith('selected ranks')).customdata.map(point => point[5])""")
    expected_notes = {f"rank {r} (tp {r % 4}, dp 1, pp {r // 64})" for r in chosen.tolist()}
    assert expected_notes == {line.split(": ", 1)[1] for note in notes for line in note.split("<br>")}
    assert section.locator(".pp-grid td.selected").count() == 2
    screenshot(page, "ranks-path1-selection")
    figure_shot(page, "ranks-path1-selection")

    # A stage that does not exist is said, next to the field, and the rest still selects.
    section.get_by_label("Stages (pp)").fill("7-8")
    section.get_by_role("button", name="Show").click()
    redrawn(page, "1")
    message = section.locator("#sel-pp-error")
    assert message.inner_text() == "pp selection ignored: stage 8 does not exist: stages 0–7"
    assert section.get_by_label("Stages (pp)").get_attribute("aria-invalid") == "true"
    assert "32 ranks selected" in section.inner_text()  # replica 1: 4 lanes x 8 stages
    assert page.evaluate("() => window.__sameDocument") is True
    # A reload shows the same, from the server.
    page.reload()
    assert "stage 8 does not exist: stages 0–7" in page.locator("#sel-pp-error").inner_text()
    assert page.problems.take() == []


def test_colour_by_saturation_and_straggler_in_place_keeping_the_zoom(live_server, page, screenshot, megatron):
    from apps.saturation.models import JobSaturation

    record = JobSaturation.objects.get(job=megatron)
    assert record.status == "ready"
    straggler_hosts = {gpu["host"] for gpu in record.per_gpu if gpu.get("straggler")}
    assert straggler_hosts  # the demo plants a power-throttled GPU
    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    legend_of(page, "rank-figure")
    count_draws(page)
    section.get_by_label("Colour by").select_option("saturation")
    redrawn(page, "0")
    trace = page.evaluate("""() => document.getElementById('rank-figure').data.find(t => t.name.startsWith('Saturation S'))""")
    assert trace["marker"]["cmin"] == 0 and trace["marker"]["cmax"] == 100 and trace["marker"]["showscale"] is True
    lowest = {}
    for gpu in record.per_gpu:
        if gpu.get("score") is not None:
            lowest[gpu["host"]] = min(lowest.get(gpu["host"], 101), gpu["score"])
    drawn = dict(zip([point[0] for point in trace["customdata"]], trace["marker"]["color"]))
    assert drawn == {host: lowest[host] for host in drawn} and len(drawn) >= 120
    assert "lowest Saturation S" in section.locator("#rank-colour-note").inner_text()
    screenshot(page, "ranks-colour-saturation")
    figure_shot(page, "ranks-colour-saturation")

    # Zoom in; the redraw below must keep it.
    ranges = "() => ['xaxis', 'yaxis'].map(axis => document.getElementById('rank-figure').layout[axis].range)"
    full = page.evaluate(ranges)
    page.evaluate("() => Plotly.relayout('rank-figure', {'xaxis.range': [4, 6], 'yaxis.range': [-3, -1]})")
    zoom = page.evaluate(ranges)
    section.get_by_label("Colour by").select_option("straggler")
    redrawn(page, "1")
    legend = legend_of(page, "rank-figure")
    assert any(name.startswith("straggler (") for name in legend) and any(name.startswith("keeps pace (") for name in legend)
    hosts = page.evaluate("""() => document.getElementById('rank-figure').data
        .find(t => t.name.startsWith('straggler (')).customdata.map(point => point[0])""")
    assert set(hosts) == straggler_hosts
    after = page.evaluate(ranges)
    # The view stays where the user put it: same centre, about the same size (the axes keep a 1:1 aspect,
    # so a legend of another height widens the range a little), far from the whole drawing it started with.
    for (low, high), (zoom_low, zoom_high), (full_low, full_high) in zip(after, zoom, full):
        assert abs((low + high) - (zoom_low + zoom_high)) / 2 < 0.01
        assert (zoom_high - zoom_low) <= (high - low) < 1.25 * (zoom_high - zoom_low) < 0.8 * (full_high - full_low)
    assert page.evaluate("() => window.__sameDocument") is True and "rank_colour=straggler" in page.url
    page.evaluate("() => Plotly.relayout('rank-figure', {'xaxis.autorange': true, 'yaxis.autorange': true})")
    screenshot(page, "ranks-colour-straggler")
    figure_shot(page, "ranks-colour-straggler")
    assert page.problems.take() == []


def test_the_selection_works_without_javascript(live_server, browser, megatron):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        log_in_and_open(page, live_server.url, megatron)
        section = page.get_by_role("region", name="Megatron ranks")
        section.get_by_label("Replicas (dp)").fill("1")
        section.get_by_label("Stages (pp)").fill("6,99")
        section.get_by_role("button", name="Show").click()
        page.wait_for_url("**sel_dp=1**")
        section = page.get_by_role("region", name="Megatron ranks")
        assert "stage 99 does not exist: stages 0–7" in section.locator("#sel-pp-error").inner_text()
        assert "32 ranks selected" in section.inner_text()  # replica 1; the bad stage field is ignored
        assert section.locator(".pp-grid td.selected").count() == 8
    finally:
        context.close()


def test_path_2_exact_rank_map_moves_the_ranks(live_server, page, screenshot, megatron, api_client):
    from django.contrib.auth import get_user_model

    nodes = megatron.node_list
    reversed_map = [{"rank": r, "host": nodes[len(nodes) - 1 - r // 4], "local_rank": r % 4} for r in range(512)]
    api_client.force_authenticate(get_user_model().objects.get(username="demo"))
    response = api_client.put(f"/api/v1/jobs/alps/{megatron.job_id}/layout/", {"tp": 4, "pp": 8, "ranks": reversed_map}, format="json")
    assert response.status_code == 200
    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    assert "exact rank map" in section.inner_text()
    first_cell = section.locator(".pp-grid tbody tr").first.locator("td").first
    assert first_cell.get_attribute("title").startswith(f"rank 0 · {nodes[-1]}")
    legend_of(page, "rank-figure")
    screenshot(page, "ranks-path2-map")
    assert page.problems.take() == []
