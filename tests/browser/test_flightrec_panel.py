"""Issue 36, acceptance 3, in headless Chromium on the demo: the timed-out Megatron job whose rank 37 never entered a
data-parallel all-reduce names the culprit on its first screen (node, GPU, Megatron coordinates, the XID the
telemetry saw) right after how the job ended, and the "Stuck collectives" panel shows it on the topology (its node
marked in its dragonfly group), in the rank x sequence view and in the culprits table; the second demo job names
the rank that called a tensor-parallel all-reduce with another size. Screenshots:
test-artifacts/screenshots/flightrec-hang.png (and -first-screen.png), flightrec-mismatch.png."""
import pytest

from tests.demo_snapshot import load_demo

from .test_job_first_screen import open_job
from .test_job_page import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def demo_jobs(transactional_db):
    from apps.jobs.models import Job

    load_demo()
    return {name: Job.objects.get(name=name, source="demo") for name in ("gpt-13b-dp-hang", "gpt-13b-after-refactor")}


def test_the_culprit_is_on_the_first_screen_and_on_the_topology(live_server, page, demo_jobs, screenshot):
    job = demo_jobs["gpt-13b-dp-hang"]
    log_in(page, live_server.url, "/jobs/")
    open_job(page, live_server, job, screenshot, "flightrec-hang")
    findings = page.locator("#first-screen .finding, #first-screen li").all_text_contents() or [page.locator("#first-screen").text_content()]
    text = " ".join(findings)
    host = job.node_list[37 // 4]
    assert f"{host} GPU 1" in text and "rank 37 never entered all_reduce" in text and "data-parallel group" in text
    assert "XID" in text or "79" in text
    # how it ended comes first, and names the hang, not "a longer --time", as the likely cause
    ending = page.locator("#first-screen .finding").first.text_content()
    assert "time limit" in ending and "stuck collective" in ending and "rank 37 never entered" in ending
    assert "longer --time" not in ending
    panel = page.locator("#panel-flightrec")
    panel.scroll_into_view_if_needed()
    assert "rank 37 never entered all_reduce" in page.locator("#flightrec-verdict").text_content()
    marked = page.locator("#flightrec-topology .fr-node--culprit")
    assert marked.count() == 1 and marked.first.text_content() == host
    assert "rank 37" in marked.first.get_attribute("title")
    row = page.locator("#flightrec-culprits tbody tr").first
    cells = row.locator("td").all_text_contents()
    assert cells[0] == "37" and cells[1] == host and cells[2] == "1" and cells[3] == "hsn1"
    assert "XID" in cells[-1] or "79" in cells[-1]
    assert "never entered" in page.locator("#flightrec-grid tbody tr").first.text_content()
    screenshot(page.locator("#panel-flightrec").page, "flightrec-hang-panel")


def test_the_mismatch_names_the_rank_and_both_sizes(live_server, page, demo_jobs, screenshot):
    job = demo_jobs["gpt-13b-after-refactor"]
    log_in(page, live_server.url, "/jobs/")
    open_job(page, live_server, job, screenshot, "flightrec-mismatch")
    verdict = page.locator("#flightrec-verdict").text_content()
    assert "rank 12 called all_reduce" in verdict and "[[4096, 2560]] instead of [[4096, 5120]]" in verdict
    assert "tensor-parallel group" in verdict
