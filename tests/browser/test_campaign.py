"""The campaign page in headless Chromium (issue 37, acceptance 4): the verdict and facts first, the badput bar, the
failures, the curves across allocations and the goodput bars drawn by Plotly; a member job's first screen links to it.
Screenshot: test-artifacts/screenshots/campaign.png."""
import io
import random

import pytest

from .test_job_page import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def campaign_world(transactional_db, make_user, store, settings):
    from apps.campaigns import demo
    from apps.campaigns.models import Campaign
    from apps.core.demo import DemoContext
    from apps.jobs.models import Cluster

    Cluster.objects.create(name="alps")
    demo.build(DemoContext(seed=1, rng=random.Random(1), out=io.StringIO(),
                           shared={"hostnames": [f"nid{i:06d}" for i in range(1, 200)], "memberships": {"demo": ["a-llm01"]}}))
    make_user("demo", password="pw-for-tests-1", accounts=["a-llm01"])
    return Campaign.objects.get(name=demo.NAME)


def test_the_campaign_page_draws_its_figures_and_a_member_job_links_to_it(live_server, page, screenshot, campaign_world):
    from apps.campaigns import demo

    page.goto(f"{live_server.url}/accounts/login/?next=/jobs/alps/{demo.FIRST_ID + 3}/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/jobs/alps/{demo.FIRST_ID + 3}/")
    link = page.locator("#fact-campaign a")
    assert link.inner_text() == "allocation 4 of 14"
    link.click()
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign_world.pk}/")
    wait_until(page, "document.getElementById('curves-figure').dataset.drawn === 'true' && "
                     "document.getElementById('goodput-figure').dataset.drawn === 'true'")
    verdict = page.locator("#verdict-line").inner_text()
    assert "allocated GPU-hours produced kept training progress" in verdict and "14 allocations" in verdict
    assert page.locator("#failure-table tbody tr").count() == 3
    assert "NCCL timeout" in page.locator("#failure-table").inner_text()
    # the curves: three series over every allocation, allocation starts and failures marked
    shapes = page.evaluate("document.getElementById('curves-figure').layout.shapes.length")
    assert shapes == 14 + 3
    bars = page.evaluate("document.getElementById('goodput-figure').data.length")
    assert bars >= 5
    screenshot(page, "campaign")
