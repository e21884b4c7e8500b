"""The job comparison in headless Chromium: the verdict first, differing rows marked, jobs added and removed in place
(the address follows), a refused job explained, the scaling chart drawn (hand-built jobs; screenshot compare.png);
then the demo's scaling series of one model at 32 to 512 GPUs (screenshot compare-scaling.png)."""
import pytest

from tests.appmetrics.test_compare import MODEL, OTHER_MODEL, SIX_GROUPS, make_job, nodes_of

from .conftest import SCREENSHOTS
from .session import log_in
from .test_job_page import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def runs(transactional_db, store, make_user):
    """One model trained at 24, 48 and 96 GPUs (two placements at 24), another model, and mallory's job."""
    from apps.jobs.models import Cluster
    from apps.topology.generator import generate
    from apps.topology.services import topology_apply

    topology_apply(generate(SIX_GROUPS), source="test", prune=False)
    cluster = Cluster.objects.create(name="alps")
    make_job(cluster, 1001, [nodes_of(group, 1)[0] for group in range(6)], tokens_per_s=24 * 1000.0, layout=(4, 2, 3),
             saturation=(48.0, "link", 2))
    make_job(cluster, 1003, nodes_of(0) + nodes_of(1, 2), tokens_per_s=24 * 1180.0, layout=(4, 2, 3), saturation=(61.0, "compute", 0))
    make_job(cluster, 1010, nodes_of(2) + nodes_of(3) + nodes_of(4), tokens_per_s=48 * 900.0, layout=(4, 2, 6))
    make_job(cluster, 1011, [f"nid{n:06d}" for n in range(1, 25)], model={**MODEL, "global_batch": 256}, tokens_per_s=96 * 750.0,
             layout=(4, 4, 6))
    make_job(cluster, 1002, nodes_of(5), model=OTHER_MODEL, tokens_per_s=16 * 700.0)
    make_job(cluster, 2001, nodes_of(5), user="mallory", account="a-secret", tokens_per_s=9999.0, name="secret-project-x")
    make_user("alice", password="pw-for-tests-1", accounts=["a-llm01"])


def test_compare_side_by_side_then_scaling_in_place(live_server, page, screenshot, runs):
    log_in(page, live_server.url, "alice", "pw-for-tests-1", "/jobs/compare/?jobs=alps/1001,alps/1003")
    page.wait_for_url(f"{live_server.url}/jobs/compare/?jobs=alps/1001,alps/1003")
    wait_until(page, "document.documentElement.dataset.compareReady === 'true'")
    verdict = page.locator("#verdict-line").inner_text()
    assert verdict == ("alps/1003 trains 18 % more tokens/s per GPU than alps/1001 at the same model: "
                       "its nodes span 2 dragonfly groups, not 6.")
    assert page.locator("#compare-verdict").bounding_box()["y"] < page.locator("#compare-table").bounding_box()["y"]
    headers = page.locator("#compare-table thead th a").all_inner_texts()
    assert headers == ["alps/1001", "alps/1003"]
    groups = page.locator("#compare-table tr[data-key='placement.groups']")
    assert "differs" in groups.get_attribute("class")
    assert groups.locator(".differs-marker").inner_text() == "≠"  # a marker, not only the shading
    assert groups.locator("td").all_inner_texts() == ["6", "2"]
    same = page.locator("#compare-table tr[data-key='model.layers']")
    assert same.get_attribute("class") == "" and same.locator(".differs-marker").count() == 0
    assert page.locator("#compare-table tr[data-key='mfu'] td").first.inner_text().endswith(" %")
    assert page.locator("#scaling-chart").is_hidden()  # two runs at the same GPU count: no scaling yet
    assert "all use 24 GPUs; add a run of it at another GPU count" in page.locator("#scaling-note").inner_text()
    screenshot(page, "compare")
    assert page.problems.take() == []

    page.evaluate("window.__sameDocument = true")  # survives only if nothing navigates
    page.get_by_label("Add a job").fill("alps/1010, alps/1011 alps/1002")
    page.get_by_role("button", name="Add").click()
    wait_until(page, "new URL(location.href).search === '?jobs=alps/1001,alps/1003,alps/1010,alps/1011,alps/1002'")
    wait_until(page, "document.documentElement.dataset.compareReady === 'true'")
    assert page.evaluate("window.__sameDocument") is True
    page.wait_for_selector("#scaling-chart[data-rendered=true]")
    rows = page.locator("#scaling-table tbody tr")
    # by GPUs; among the two 24-GPU runs the first asked (1001) is the baseline
    assert rows.evaluate_all("rows => rows.map(row => row.dataset.job)") == ["alps/1001", "alps/1003", "alps/1010", "alps/1011"]
    assert rows.nth(0).locator("td").all_inner_texts()[-2:] == ["100 %", "baseline"]
    assert rows.nth(1).locator("td").all_inner_texts()[-2:] == ["118 %", "strong"]
    assert rows.nth(2).locator("td").all_inner_texts()[-2:] == ["90 %", "strong"]
    assert rows.nth(3).locator("td").all_inner_texts()[-2:] == ["75 %", "weak"]
    assert "alps/1002" in page.locator("#scaling-note").inner_text()  # another model: left out, and said so
    # Plotly's data: the measured tokens/s per GPU and the ideal line at the baseline's.
    traces = page.evaluate("Array.from(document.getElementById('scaling-chart').data, "
                           "t => ({x: Array.from(t.x), y: Array.from(t.y), name: t.name}))")
    assert traces[0]["x"] == [24, 24, 48, 96] and traces[0]["y"] == pytest.approx([1000, 1180, 900, 750])
    assert traces[1]["name"].startswith("ideal") and traces[1]["y"] == pytest.approx([1000, 1000])
    assert traces[2]["y"] == pytest.approx([100, 118, 90, 75])
    assert page.problems.take() == []

    page.get_by_label("Add a job").fill("alps/2001")  # mallory's: refused like an unknown job, nothing changes
    page.get_by_role("button", name="Add").click()
    page.wait_for_selector("#compare-errors:not([hidden])")
    assert "unknown or not visible to you: alps/2001" in page.locator("#compare-errors").inner_text()
    assert "mallory" not in page.content() and "secret-project-x" not in page.content()
    assert page.locator("#compare-table thead th a").count() == 5
    assert [p for p in page.problems.take() if "404" not in p] == []  # the 404 is the answer asked for

    page.get_by_role("button", name="Remove alps/1002").click()
    wait_until(page, "new URL(location.href).search === '?jobs=alps/1001,alps/1003,alps/1010,alps/1011'")
    wait_until(page, "document.documentElement.dataset.compareReady === 'true'")
    assert page.locator("#compare-errors").is_hidden()
    assert "alps/1002" not in page.locator("#scaling-note").inner_text()
    for ref in ("alps/1001", "alps/1003", "alps/1010"):
        page.get_by_role("button", name=f"Remove {ref}").click()
        wait_until(page, f"!new URL(location.href).search.includes('{ref}')")
    wait_until(page, "document.documentElement.dataset.compareReady === 'true'")
    assert "One job alone" in page.locator("#compare-state").inner_text()
    page.get_by_role("button", name="Remove alps/1011").click()
    wait_until(page, "location.search === ''")
    assert "Name the jobs to compare" in page.locator("#compare-state").inner_text()
    assert page.locator("#compare-side").is_hidden()
    assert page.evaluate("window.__sameDocument") is True
    assert page.problems.take() == []


def test_the_demo_scaling_series(live_server, page, transactional_db):
    from apps.appmetrics.demo import SCALING_FIRST_ID
    from tests.demo_snapshot import load_demo

    load_demo()
    refs = ",".join(f"alps/{SCALING_FIRST_ID + index}" for index in range(5))
    log_in(page, live_server.url, "demo", "belvedere-demo", f"/jobs/compare/?jobs={refs}")
    page.wait_for_url(f"**/jobs/compare/?jobs={refs}")
    wait_until(page, "document.documentElement.dataset.compareReady === 'true'")
    page.wait_for_selector("#scaling-chart[data-rendered=true]")
    assert page.locator("#verdict-line").inner_text().startswith(f"alps/{SCALING_FIRST_ID} trains 25 % more tokens/s per GPU "
                                                                  f"than alps/{SCALING_FIRST_ID + 4} at the same model")
    kinds = page.locator("#scaling-table tbody tr td:last-child").all_inner_texts()
    assert kinds == ["baseline", "strong", "strong", "strong", "strong"]
    efficiency = page.locator("#scaling-table tbody tr:last-child td").nth(6).inner_text()
    assert efficiency in ("79 %", "80 %", "81 %")  # planted at 80 % of the 32-GPU run's tokens/s per GPU
    page.locator("#compare-scaling").screenshot(path=str(SCREENSHOTS / "compare-scaling.png"))
    assert page.problems.take() == []
