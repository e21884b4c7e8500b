"""Ranks on the demo Megatron job: no layout, sizes only, the exact map; and a selection."""
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def megatron(transactional_db):
    from django.core.management import call_command

    from apps.jobs.models import Job

    call_command("demo")
    return Job.objects.get(name="megatron-gpt-175b-pretrain")


def log_in_and_open(page, base_url, job, query=""):
    page.goto(f"{base_url}/accounts/login/?next=/jobs/alps/{job.job_id}/{query}")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/jobs/alps/{job.job_id}/*")


def legend_of(page, figure_id):
    page.wait_for_selector(f"#{figure_id}[data-rendered=true]", timeout=60_000)
    return page.locator(f"#{figure_id} .legendtext").evaluate_all("items => items.map(item => item.textContent)")


def test_path_0_no_layout_shows_the_nodes_and_how_to_add_one(live_server, page, screenshot, megatron):
    megatron.layout.delete()
    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    assert "does not know this job's Megatron layout yet" in section.inner_text()
    assert section.locator("pre.command").count() == 3 and section.locator("details[open]").count() == 1
    assert "this job's nodes (128)" in legend_of(page, "topology-figure")  # the nodes, in one colour
    screenshot(page, "ranks-path0")
    assert page.problems.take() == []


def test_path_1_sizes_colour_nodes_by_stage_and_select_replica_1_stages_7_8(live_server, page, screenshot, megatron):
    from apps.ranks.selectors import job_ranks

    log_in_and_open(page, live_server.url, megatron)
    section = page.get_by_role("region", name="Megatron ranks")
    assert "TP 4 × PP 8 × DP 16" in section.inner_text() and "block distribution" in section.inner_text()
    legend = legend_of(page, "rank-figure")
    assert [f"pp {stage} (16)" for stage in range(8)] == [name for name in legend if name.startswith("pp ")]
    screenshot(page, "ranks-path1-by-stage")

    # "Stages 7 and 8" (1-based) of replica 1 = pp 6 and 7.
    section.get_by_label("Replicas (dp)").fill("1")
    section.get_by_label("Stages (pp)").fill("6,7")
    section.get_by_role("button", name="Show").click()
    page.wait_for_url("**sel_dp=1**")
    legend = legend_of(page, "rank-figure")
    ranks = job_ranks(megatron)
    expected_hosts = {ranks.table.hosts[r] for r in ranks.table.select(dp=[1], pp=[6, 7])}
    assert len(expected_hosts) == 2  # TP=4 fills a node: one node per stage
    assert f"selected ranks ({len(expected_hosts)})" in legend
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
    expected_notes = {f"rank {r} (tp {r % 4}, dp 1, pp {r // 64})" for r in ranks.table.select(dp=[1], pp=[6, 7]).tolist()}
    assert expected_notes == {line.split(": ", 1)[1] for note in notes for line in note.split("<br>")}
    cells = section.locator(".pp-grid td.selected")
    assert cells.count() == 2
    screenshot(page, "ranks-path1-selection")
    assert page.problems.take() == []


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
