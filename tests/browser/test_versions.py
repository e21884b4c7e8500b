"""The version minority on the demo's Megatron job and the fleet's version map, in headless Chromium (issue 38,
acceptance 4): screenshots test-artifacts/screenshots/versions-job-finding.png, versions-job-panel.png and
versions-fleet-map.png."""
import time

import pytest

from . import session

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def wait_until(page, expression, timeout=60_000):
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(100)


def test_the_driver_minority_on_the_job_page_and_the_fleet_version_map(live_server, page, transactional_db,
                                                                         django_user_model, screenshot):
    from apps.jobs.models import Job
    from apps.telemetry.models import VersionFact

    load_demo()
    django_user_model.objects.create_user("versions", password="versions-pw", is_staff=True)
    session.log_in(page, live_server.url, "versions", "versions-pw", "/jobs/")
    page.wait_for_url("**/jobs/*")
    job = Job.objects.get(name="megatron-gpt-175b-pretrain")
    minority = sorted(VersionFact.objects.filter(host__in=job.node_list, key="driver", value="550.54.15")
                      .values_list("host", flat=True))
    assert len(minority) == 4

    page.goto(f"{live_server.url}/jobs/{job.cluster.name}/{job.job_id}/")
    wait_until(page, "document.documentElement.dataset.jobPageReady === 'true'")
    finding = page.locator("#findings .finding", has_text="run driver 550.54.15")
    assert finding.count() == 1
    words = finding.inner_text()
    assert f"4 of {len(job.node_list)} nodes run driver 550.54.15 while {len(job.node_list) - 4} run 560.35.03: " in words
    assert all(host[3:] in words for host in minority)  # the compressed hostlist names exactly these
    assert "the same nodes also differ in CUDA driver (12.4 against 12.6)" in words  # one finding, not two
    finding.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot(page, "versions-job").with_name("versions-job-finding.png")), full_page=False)
    panel = page.locator("#panel-versions")
    panel.scroll_into_view_if_needed()
    wait_until(page, "!!document.querySelector('#versions-table')")
    panel.screenshot(path=str(screenshot(page, "versions-job").with_name("versions-job-panel.png")))

    page.goto(f"{live_server.url}/system/versions/")
    assert page.locator("#versions-by-partition .version-map__mixed").count() >= 1
    assert page.locator("#versions-by-group .version-map__mixed").count() >= 1
    assert page.locator("#versions-drift tbody tr").count() >= 1
    screenshot(page, "versions-fleet-map")
    assert page.problems.take() == []
