"""The saturation panel's 10-90 % band over time, drawn in Chromium (issue 35, item 6a, acceptance 2): a job whose
GPUs all missed one sample shows the band as two closed shapes that stop at the gap (Plotly's fill="tonexty"
bridged it and drew wedges above the spread), and the legend sits above the plot, clear of the time axis, at
desktop and phone widths."""
import pytest

from .conftest import SCREENSHOTS
from .session import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def job_with_a_gap(transactional_db, store, make_user):
    from datetime import timedelta

    import pandas as pd
    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.synthetic_jobs import job_chunks

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=20)
    hosts = [f"nid{n:06d}" for n in range(1, 5)]
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=41, user_name="alice", account="a-llm01",
                             name="megatron-band", state="RUNNING", submit_time=start, start_time=start, node_list=hosts,
                             gpus=16)
    hole = (pd.Timestamp(start + timedelta(seconds=450)), pd.Timestamp(start + timedelta(seconds=460)))
    for chunk in job_chunks("megatron", hosts, start, 15 * 60, seed=3):
        store.write(chunk[(chunk["ts"] < hole[0]) | (chunk["ts"] >= hole[1])])  # every GPU misses one sample
    job_saturation_refresh(job)
    make_user("alice", password="pw-for-tests-1")
    return job


LAYOUT = """(id) => {
  const element = document.getElementById(id);
  const box = (node) => { const r = node.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {legend: box(element.querySelector('.legend')), plot: box(element.querySelector('.bglayer rect, .nsewdrag')),
          ticks: Array.from(element.querySelectorAll('.xtick text')).map(box),
          band: element.data.filter((t) => (t.name || '').endsWith('10-90 %')).map((t) => ({fill: t.fill, x: t.x})),
          tonext: element.data.filter((t) => (t.fill || '').startsWith('tonext')).length};
}"""


def overlaps(a, b) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_band_stops_at_a_gap_and_its_legend_clears_the_time_axis(live_server, page, job_with_a_gap, width):
    page.set_viewport_size({"width": width, "height": 800})
    log_in(page, live_server.url, "alice", "pw-for-tests-1", "/jobs/alps/41/")
    page.wait_for_url("**/jobs/alps/41/*")
    figure = page.locator("#saturation-bands")
    figure.scroll_into_view_if_needed()
    page.wait_for_selector("#saturation-bands[data-rendered=true]", timeout=60_000)
    drawn = page.evaluate(LAYOUT, "saturation-bands")
    assert drawn["tonext"] == 0
    band = next(trace for trace in drawn["band"] if trace["fill"] == "toself")
    assert band["x"].count(None) == 1  # two shapes: before and after the missing sample, none across it
    assert drawn["legend"]["bottom"] <= drawn["plot"]["top"] + 1, drawn  # above the plot, not over it
    assert not any(overlaps(drawn["legend"], tick) for tick in drawn["ticks"]), drawn
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    figure.screenshot(path=str(SCREENSHOTS / f"saturation-band-{width}.png"))
    assert page.problems.take() == []
