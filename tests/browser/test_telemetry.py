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
    from django.core.management import call_command

    from apps.jobs.models import Job

    call_command("demo", stdout=open("/dev/null", "w"))
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    page.goto(f"{live_server.url}/accounts/login/?next=/jobs/alps/{job.job_id}/?ssort=pp")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    for figure in ("saturation-heatmap", "saturation-bands", "saturation-scatter"):
        page.wait_for_selector(f"#{figure}[data-rendered=true]", timeout=60_000)
    section = page.get_by_role("region", name="GPU saturation")
    assert "tensor cores" in section.inner_text() and page.locator("#ssort").input_value() == "pp"
    section.screenshot(path=str(screenshot(page, "saturation-megatron-page").with_name("saturation-megatron.png")))
    assert page.problems.take() == []
