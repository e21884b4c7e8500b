"""A node's own history in headless Chromium (issue 39, acceptance 3): the owner of a job that ran on nid001234 opens
/nodes/nid001234/ from the job page's host panel; the figure draws GPU activity, page cache in GPU memory, NIC traffic,
the host, the jobs (another project's unnamed) and vetting on one time axis; another researcher without a job there gets
a 404. Screenshots: test-artifacts/screenshots/node-history.png, node-history-staff.png."""
import time

import pytest

from tests.system.test_node_history import HOST, SECRET, build_node_world

from . import session

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def wait_until(page, expression, timeout=30_000):
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(100)


def test_the_node_history_page_draws_one_time_axis_and_hides_others_jobs(live_server, page, transactional_db, make_user,
                                                                         store, screenshot):
    world = build_node_world(make_user, store)
    session.log_in(page, live_server.url, "olive", "pw-for-tests-1", "/jobs/")
    page.wait_for_url("**/jobs/*")
    page.goto(f"{live_server.url}/nodes/{HOST}/?days=2")
    wait_until(page, "!!document.querySelector('#node-history .main-svg')")
    screenshot(page, "node-history")
    titles = page.evaluate("Array.from(document.querySelectorAll('#node-history .infolayer text[class^=y][class$=title]')).map(e => e.textContent)")
    assert titles == ["GPU SM active", "page cache in GPU memory (GB)", "NIC sent (GB/s)", "host", "jobs", "vetting"]
    text = page.locator("main").inner_text()
    assert SECRET not in text and "4343" not in text and "another project's job" in text
    assert page.locator("#node-jobs a", has_text="olive-pretrain (alps/4242)").count() == 1
    screenshot(page, "node-history")
    page.locator("#node-days").select_option("7")
    page.locator("#node-days-show").click()
    page.wait_for_url("**days=7")
    wait_until(page, "!!document.querySelector('#node-history .main-svg')")
    assert page.problems.take() == []

    make_user("nora", accounts=["a-none"])
    page.context.clear_cookies()
    session.log_in(page, live_server.url, "nora", "pw-for-tests-1", "/jobs/")
    page.wait_for_url("**/jobs/*")
    response = page.goto(f"{live_server.url}/nodes/{HOST}/")
    assert response.status == 404
    page.problems.take()

    page.context.clear_cookies()
    session.log_in(page, live_server.url, "sam", "pw-for-tests-1", "/jobs/")
    page.wait_for_url("**/jobs/*")
    page.goto(f"{live_server.url}/nodes/{HOST}/?days=2")
    wait_until(page, "!!document.querySelector('#node-history .main-svg')")
    assert SECRET in page.locator("#node-jobs").inner_text()
    screenshot(page, "node-history-staff")
    assert page.problems.take() == []


def test_the_job_page_draws_the_host_row_under_the_gpus(live_server, page, transactional_db, make_user, store, screenshot):
    """The data-loader-bound synthetic job's page: the host strip under the telemetry heatmap's GPU rows and the host row
    of the throughput figure, the finding on the first screen, and the host panel's links to the nodes' histories.
    Screenshots: job-host-heatmap.png, job-host-throughput.png, job-host-panel.png."""
    from tests.system.test_host_panel import build

    build(store, 4242, stall_share=0.25, checkpoint_every_s=1600, page_cache_gpu={("nid001234", 1): 23e9})
    make_user("olive", accounts=["a-llm01"])
    session.log_in(page, live_server.url, "olive", "pw-for-tests-1", "/jobs/")
    page.wait_for_url("**/jobs/*")
    page.goto(f"{live_server.url}/jobs/alps/4242/")
    wait_until(page, "document.documentElement.dataset.jobPageReady === 'true'")
    assert page.locator("#findings .finding", has_text="GPUs wait on the host: during the").count() == 1
    heatmap = page.locator("#telemetry-heatmap")
    heatmap.scroll_into_view_if_needed()
    page.wait_for_selector("#telemetry-heatmap[data-rendered=true]", timeout=60_000)
    strip = page.evaluate("document.getElementById('telemetry-heatmap').data.map(t => [t.yaxis || 'y', t.y.length])")
    assert strip == [["y", 8], ["y2", 3]]
    heatmap.screenshot(path=str(screenshot(page, "job-host").with_name("job-host-heatmap.png")))
    figure = page.locator("#appmetrics-figure")
    figure.scroll_into_view_if_needed()
    page.wait_for_selector("#appmetrics-figure[data-rendered=true]", timeout=60_000)
    names = page.evaluate("document.getElementById('appmetrics-figure').data.map(t => t.name)")
    assert {"CPU busy", "data-loader CPU", "host memory used"} <= set(names)
    figure.screenshot(path=str(screenshot(page, "job-host").with_name("job-host-throughput.png")))
    panel = page.locator("#panel-host")
    panel.scroll_into_view_if_needed()
    assert panel.locator("a.node-link", has_text="nid001234").get_attribute("href") == "/nodes/nid001234/"
    panel.screenshot(path=str(screenshot(page, "job-host").with_name("job-host-panel.png")))
    assert page.problems.take() == []
