"""The demo Megatron job's telemetry and saturation panels in Chromium: drawn after the first paint,
switchable in place, stragglers linked to the network with the job kept in view, PNG download."""
import math

import pytest

from .session import log_in

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def open_job(page, live_server, job, query=""):
    log_in(page, live_server.url, "demo", "belvedere-demo", f"/jobs/alps/{job.job_id}/{query}")
    page.wait_for_url(f"**/jobs/alps/{job.job_id}/*")


def test_megatron_job_telemetry_heatmap(live_server, page, screenshot, transactional_db):
    from apps.jobs.models import Job
    from apps.telemetry.synthetic_jobs import default_planted

    load_demo()
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    open_job(page, live_server, job, "?tfield=100")
    section = page.get_by_role("region", name="GPU telemetry")
    section.scroll_into_view_if_needed()
    page.wait_for_selector("#telemetry-heatmap[data-rendered=true]", timeout=60_000)
    assert page.locator("#tfield").input_value() == "100"  # the field from the address is the one drawn
    assert page.locator("#telemetry-heatmap").get_attribute("data-rendered-metric") == "100"
    assert "512 of 512 GPUs reporting" in section.inner_text()
    host, gpu = default_planted(list(job.node_list)).throttled
    labels = page.evaluate("document.getElementById('telemetry-heatmap').data[0].y")
    assert len(labels) == 512 and any(label.endswith(f"{host}:{gpu}") for label in labels)
    # the node x field table loads when opened
    page.locator("#telemetry-nodes summary").click()
    page.wait_for_selector("#telemetry-nodes table", timeout=30_000)
    assert page.locator("#telemetry-nodes tbody tr").count() == 128
    path = screenshot(page, "telemetry-megatron-page")
    section.screenshot(path=str(path.with_name("telemetry-megatron-sm-clock.png")))
    assert page.problems.take() == []


def test_megatron_job_saturation_section(live_server, page, screenshot, transactional_db):
    """Score, stragglers in words, bands, scatter, a straggler's series against its peers, PNG download,
    and the straggler on the network with the job's other nodes still shown."""
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    load_demo()
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    record = JobSaturation.objects.get(job=job)
    throttled = next(s for s in record.stragglers if s["signal"] == "sm_clock")
    open_job(page, live_server, job, "?ssort=pp")
    section = page.get_by_role("region", name="GPU saturation")
    for figure in ("saturation-heatmap", "saturation-bands", "saturation-scatter"):
        page.locator(f"#{figure}").scroll_into_view_if_needed()
        page.wait_for_selector(f"#{figure}[data-rendered=true]", timeout=60_000)
    text = section.inner_text()
    # The page rounds half up, Python's format half to even: either whole number next to the record's score.
    shown = int(page.locator("#saturation-score").inner_text().split()[0])
    assert shown in {math.floor(record.score), math.ceil(record.score)}, (shown, record.score)
    assert "tensor cores" in text and page.locator("#ssort").input_value() == "pp"
    bands = page.evaluate("document.getElementById('saturation-bands').data.map(t => t.name)")
    assert "saturation S: 10-90 %" in bands and "saturation S: median" in bands
    stragglers = page.locator("#stragglers li")
    assert stragglers.count() == len(record.stragglers) == 3
    item = stragglers.filter(has_text="SM clock")
    assert "28% below its peers" in item.inner_text() and "robust SDs below its peers" in item.inner_text()

    # its series against its peers' median and band
    item.get_by_role("button", name="its series against its peers").click()
    page.wait_for_selector("#gpu-series .gpu-series__figure[data-rendered=true]", timeout=30_000)
    names = page.evaluate("document.querySelector('#gpu-series .gpu-series__figure').data.map(t => t.name)")
    assert "peers' median" in names and "peers 10–90 %" in names
    assert "SM clock 28% below its peers" in page.locator("#gpu-series .gpu-series__note").inner_text()  # its finding
    path = screenshot(page, "saturation-megatron-page")
    section.screenshot(path=str(path.with_name("saturation-megatron.png")))

    with page.expect_download() as download:
        page.locator("[data-download-png=saturation-heatmap]").click()
    saved = download.value.path()
    assert download.value.suggested_filename == f"saturation-alps-{job.job_id}-heatmap.png"
    assert open(saved, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert page.problems.take() == []

    # the straggler on the network: the job's nodes stay highlighted, its node in focus
    item.get_by_role("link", name="on the network, with this job").click()
    page.wait_for_url("**/topology/?*focus=*")
    assert f"focus={throttled['host']}" in page.url
    page.wait_for_selector("[data-figure][data-rendered=true]", timeout=60_000)
    legend = " ".join(page.locator(".legendtext").evaluate_all("items => items.map(item => item.textContent)"))
    assert "this job's nodes (128)" in legend and "straggler (1)" in legend
    screenshot(page, "saturation-straggler-on-topology")
    assert page.problems.take() == []
