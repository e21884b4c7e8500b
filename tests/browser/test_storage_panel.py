"""The "Storage" panel on the demo Megatron job in headless Chromium: the verdict on its checkpoints first, the figure
draws write/read rates, metadata operations and the GPUs' activity on one time axis, every write burst shaded on every
row, and each burst inside the GPU telemetry's span sits on a GPU-idle dip (within a bucket), read from the figure's
own data in the page. A live round redraws it in place. Screenshot: test-artifacts/screenshots/storage-panel.png."""
import pytest

from tests.demo_snapshot import load_demo

from .test_job_page import log_in, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def demo(transactional_db, settings):
    from django.core.cache import cache

    from apps.jobs.models import Job

    from apps.core.demo import feed_demo

    settings.JOB_PAGE_LIVE_SECONDS = 3
    load_demo()
    feed_demo(speed=1)  # a restored snapshot (up to 15 min old) brought up to now, as the running demo's beat would
    cache.clear()
    return Job.objects.get(name="megatron-gpt-175b-pretrain")


FIGURE = """() => {
  const element = document.getElementById('storage-figure');
  const gpu = element.data.find((trace) => trace.meta && trace.meta.gpu);
  const write = element.data.find((trace) => trace.name === 'write');
  return {traces: element.data.map((trace) => trace.name),
          rows: Object.keys(element._fullLayout).filter((key) => /^yaxis[0-9]*$/.test(key)).length,
          shapes: (element.layout.shapes || []).filter((shape) => (shape.name || '').startsWith('burst'))
                    .map((shape) => [shape.x0, shape.x1, shape.yref]),
          bursts: element.bursts,
          gpu: gpu ? {x: gpu.x, y: gpu.y, step: gpu.meta.step} : null,
          write: {x: write.x, y: write.y}};
}"""


def _seconds(text: str) -> float:
    from datetime import datetime, timezone

    return datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T")).replace(tzinfo=timezone.utc).timestamp()


def test_checkpoint_bursts_line_up_with_the_gpu_idle_dips(live_server, page, demo):
    job = demo
    log_in(page, live_server.url, f"/jobs/alps/{job.job_id}/")
    page.locator("#storage-figure").scroll_into_view_if_needed()
    page.wait_for_selector("#storage-figure[data-rendered=true]", timeout=60_000)
    verdict = page.locator("#storage-verdict").text_content()
    assert verdict.startswith("Checkpoints: ") and "every 30 min" in verdict and "GPUs idle" in verdict
    drawn = page.evaluate(FIGURE)
    assert drawn["traces"][:3] == ["write", "read", "metadata ops"]
    assert drawn["gpu"] is not None, drawn["traces"]
    bursts = drawn["bursts"]
    assert len(bursts) >= 2
    assert len(drawn["shapes"]) == len(bursts) * drawn["rows"]  # every burst on every row

    # From the figure's own data: the GPU buckets well under the median activity ...
    gpu = drawn["gpu"]
    values = sorted(v for v in gpu["y"] if v is not None)
    median = values[len(values) // 2]
    # (90 s of idle SMs may straddle two buckets, each then at 40-70 % of the usual activity)
    idle = [_seconds(x) for x, y in zip(gpu["x"], gpu["y"]) if y is not None and y < 0.75 * median]
    assert idle, "the demo's GPU telemetry window holds a checkpoint's idle SMs"
    first_gpu, last_gpu = _seconds(gpu["x"][0]), _seconds(gpu["x"][-1]) + gpu["step"]
    step = max(gpu["step"], 30)
    covered = [b for b in bursts if _seconds(b["start"]) >= first_gpu and _seconds(b["end"]) <= last_gpu]
    assert covered, "at least one burst inside the GPU telemetry's span"
    for burst in covered:  # ... each burst sits on some of them, within a bucket
        lo, hi = _seconds(burst["start"]) - step, _seconds(burst["end"]) + step
        assert any(lo <= moment <= hi for moment in idle), (burst, idle)
    # and every idle dip of the window has its burst: the GPUs idle only while a checkpoint is written
    for moment in idle:
        assert any(_seconds(b["start"]) - step - gpu["step"] <= moment <= _seconds(b["end"]) + step for b in bursts), moment
    # the write rate at the bursts is what the verdict says: far above its level elsewhere
    writes = [(x, y) for x, y in zip(drawn["write"]["x"], drawn["write"]["y"]) if y is not None]
    inside = [y for x, y in writes if any(_seconds(b["start"]) <= _seconds(x) < _seconds(b["end"]) for b in bursts)]
    outside = sorted(y for x, y in writes if not any(_seconds(b["start"]) - 60 <= _seconds(x) < _seconds(b["end"]) + 60 for b in bursts))
    assert min(inside) > 100 * outside[len(outside) // 2]
    page.wait_for_timeout(300)
    page.locator("#panel-storage").screenshot(path=str(_path("storage-panel")))

    # A live round redraws in place: no reload.
    marker = page.evaluate("window.__storage_marker = Math.random()")
    before = page.evaluate("document.getElementById('storage-figure').dataset.updated")
    wait_until(page, f"document.getElementById('storage-figure').dataset.updated !== '{before}'", timeout=20_000)
    assert page.evaluate("window.__storage_marker") == marker
    assert page.problems.take() == []


def _path(name):
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
