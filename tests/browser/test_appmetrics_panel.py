"""The "Training throughput" panel on the demo Megatron job in headless Chromium: the figure draws the application
curves and the GPUs' activity on one time axis, every dip shaded on every subplot with its kind named, the reason in
the hover; a live round redraws it in place (no reload, the zoom kept). Screenshot:
test-artifacts/screenshots/appmetrics-panel.png."""
from datetime import timedelta

import pytest

from tests.demo_snapshot import load_demo

from .test_job_page import log_in, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _plant_checkpoints(job) -> None:
    """Rows with a 40 % dip every 15 minutes and the application's checkpoint markers, for a demo that does not send
    the Megatron job's series itself (the demo helper of issue 20 does: then this plants nothing)."""
    from django.utils import timezone

    from apps.appmetrics.selectors import job_series
    from apps.appmetrics.services import metrics_ingest

    if len(job_series(job, names=["tokens_per_s"])):
        return
    end = timezone.now() - timedelta(seconds=20)
    start = max(job.start_time, end - timedelta(hours=2))
    rows, step, moment = [], 0, start
    while moment <= end:
        step += 1
        into = (moment - start).total_seconds() % 900
        dip = 600 <= into < 690  # 90 s of every 15 minutes
        rate = 1_450_000.0 * (0.6 if dip else 1.0)
        row = {"ts": moment.timestamp(), "step": step, "tokens_per_s": rate, "iteration_s": 1.5 / (0.6 if dip else 1.0),
               "loss": 2.1 + 1.5 / (1 + step / 400)}
        if into == 600:
            row["event.checkpoint"] = 90.0
        rows.append(row)
        moment += timedelta(seconds=10)
    metrics_ingest(job, rows, source="test")


@pytest.fixture
def demo(transactional_db, settings):
    from django.core.cache import cache

    from apps.jobs.models import Job

    from apps.core.demo import feed_demo

    settings.JOB_PAGE_LIVE_SECONDS = 3  # the live update is the real one, only more often
    load_demo()
    feed_demo(speed=1)  # a snapshot up to 15 min old is brought up to now, as the running demo's beat would
    cache.clear()
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    _plant_checkpoints(job)
    return job


FIGURE = """() => {
  const element = document.getElementById('appmetrics-figure');
  const layout = element._fullLayout;
  const axes = Object.keys(layout).filter((key) => /^yaxis[0-9]*$/.test(key) && layout[key].visible !== false);
  const shapes = (element.layout.shapes || []);
  return {traces: element.data.map((trace) => trace.name), axes: axes.length,
          shaded: shapes.filter((shape) => shape.type === 'rect').map((shape) => shape.yref),
          labels: (element.layout.annotations || []).map((item) => item.text),
          events: Number(element.dataset.events), range: layout.xaxis.range.map(String),
          hovers: element.data.filter((trace) => trace.meta && trace.meta.event).map((trace) => trace.hovertemplate)};
}"""


def test_the_figure_draws_the_curves_with_every_dip_shaded_and_named_and_redraws_in_place(live_server, page, demo):
    job = demo
    log_in(page, live_server.url, f"/jobs/alps/{job.job_id}/")
    first_screen = page.locator("#first-screen").text_content()  # the words, not their upper-case styling
    assert "Tokens/s per GPU" in first_screen and "MFU" in first_screen
    assert "Throughput fell" in first_screen  # a dip explained on the first screen
    page.locator("#appmetrics-figure").scroll_into_view_if_needed()
    page.wait_for_selector("#appmetrics-figure[data-rendered=true]", timeout=60_000)
    drawn = page.evaluate(FIGURE)
    assert drawn["traces"][0] == "tokens/s" and drawn["traces"][1].startswith("steady ")
    assert "loss" in drawn["traces"] and any(name.startswith(("SM active", "GPU busy")) for name in drawn["traces"])
    assert drawn["events"] >= 2
    rows = drawn["axes"]  # tokens/s, iteration time, loss, GPU activity
    assert rows >= 4
    assert len(drawn["shaded"]) == drawn["events"] * rows  # every dip on every subplot
    assert len(set(drawn["shaded"])) == rows
    assert any(label in ("checkpoint", "straggler", "evaluation", "throttling", "restart", "unknown")
               for label in drawn["labels"])
    # the test demo's GPU telemetry covers only the run's last minutes: the GPU row says so instead of looking idle
    assert any(label.startswith("GPU telemetry only from") for label in drawn["labels"]), drawn["labels"]
    assert all(hover.startswith("Throughput fell") for hover in drawn["hovers"]) and len(drawn["hovers"]) == drawn["events"]
    page.wait_for_timeout(300)
    page.locator("#panel-appmetrics").screenshot(path=str(_path("appmetrics-panel")))

    # Zoom into the first hour, wait for a live round: the figure is redrawn in place, the zoom kept.
    marker = page.evaluate("window.__appmetrics_marker = Math.random()")
    start = drawn["range"][0]
    page.evaluate("""(start) => Plotly.relayout('appmetrics-figure', {'xaxis.range': [start, new Date(new Date(start.replace(' ', 'T') + 'Z').getTime() + 3600e3).toISOString()]})""", start)
    before = page.evaluate("document.getElementById('appmetrics-figure').dataset.updated")
    wait_until(page, f"document.getElementById('appmetrics-figure').dataset.updated !== '{before}'", timeout=20_000)
    assert page.evaluate("window.__appmetrics_marker") == marker  # no reload
    kept = page.evaluate("document.getElementById('appmetrics-figure')._fullLayout.xaxis.range.map(String)")
    assert kept[0][:16] == start[:16].replace("T", " ") or kept[0][:16] == start[:16]
    assert page.locator("#appmetrics-coverage").text_content().strip().startswith("live")
    assert page.problems.take() == []


def _path(name):
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
