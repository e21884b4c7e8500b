"""The demo Megatron job's telemetry heatmap in Chromium: drawn, switchable, and the straggler visible."""
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_megatron_job_telemetry_heatmap(live_server, page, screenshot, transactional_db):
    from django.core.management import call_command

    from apps.jobs.models import Job

    call_command("demo", stdout=open("/dev/null", "w"))
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    page.goto(f"{live_server.url}/accounts/login/?next=/jobs/alps/{job.job_id}/?tfield=100")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector("#telemetry-figure[data-rendered=true]", timeout=60_000)
    section = page.get_by_role("region", name="GPU telemetry")
    assert "512 GPUs" in section.inner_text()
    assert page.locator("#tfield").input_value() == "100"  # SM clock: the throttled GPU is the dark row
    path = screenshot(page, "telemetry-megatron-page")
    section.screenshot(path=str(path.with_name("telemetry-megatron-sm-clock.png")))
    assert page.problems.take() == []


def test_megatron_job_saturation_section(live_server, page, screenshot, transactional_db):
    """Score, heatmap sorted by pipeline stage, bands, stragglers linked to the topology, PNG download."""
    from django.core.management import call_command

    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    call_command("demo", stdout=open("/dev/null", "w"))
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    record = JobSaturation.objects.get(job=job)
    throttled = next(s for s in record.stragglers if s["signal"] == "sm_clock")
    page.goto(f"{live_server.url}/accounts/login/?next=/jobs/alps/{job.job_id}/?ssort=pp")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    for figure in ("saturation-heatmap", "saturation-bands", "saturation-scatter"):
        page.wait_for_selector(f"#{figure}[data-rendered=true]", timeout=60_000)
    section = page.get_by_role("region", name="GPU saturation")
    text = section.inner_text()
    assert page.locator("#saturation-score").inner_text().startswith(f"{record.score:.0f}")
    assert "tensor cores" in text and page.locator("#ssort").input_value() == "pp"
    # the heatmap's rows go by pipeline stage (then rank); the throttled GPU's row is marked
    labels = page.evaluate("document.getElementById('saturation-heatmap').data[0].y")
    ranks = [int(label.split("rank ")[1].split(" ")[0]) for label in labels]
    assert len(labels) == 512 and ranks == sorted(ranks, key=lambda r: (r // 64, r))
    assert f"⚠ rank {throttled['rank']} · {throttled['host']} GPU {throttled['gpu']}" in labels
    bands = page.evaluate("document.getElementById('saturation-bands').data.map(t => t.name)")
    assert "saturation S: 10-90 %" in bands and "saturation S: median" in bands
    stragglers = page.locator("#stragglers li")
    assert stragglers.count() == len(record.stragglers) == 3
    item = stragglers.filter(has_text="SM clock")
    assert "28% below its peers" in item.inner_text() and "power-limited" in item.inner_text()
    path = screenshot(page, "saturation-megatron-page")
    section.screenshot(path=str(path.with_name("saturation-megatron.png")))

    with page.expect_download() as download:
        page.locator("[data-download-png=saturation-heatmap]").click()
    saved = download.value.path()
    assert download.value.suggested_filename == f"saturation-alps-{job.job_id}-heatmap.png"
    assert open(saved, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert page.problems.take() == []

    # the straggler on the network: the whole machine with its node highlighted
    item.get_by_role("link", name="on the network").click()
    page.wait_for_url(f"**/topology/?nodes={throttled['host']}")
    page.wait_for_selector("[data-figure][data-rendered=true]", timeout=60_000)
    assert page.locator("#overlay-nodes").input_value() == throttled["host"]
    screenshot(page, "saturation-straggler-on-topology")
    assert page.problems.take() == []
