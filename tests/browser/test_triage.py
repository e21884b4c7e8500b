"""The staff triage inbox in Chromium on the demo (issue 19, acceptance 1): the idle-GPU job ranks first by
GPU-hours lost, the Megatron job's stragglers, the repeat-offender nodes, the bad switch, the waiting namespace
approval and the catalogue incidents are listed; acknowledging, resolving, muting and a dry-run drain work in
place."""
import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

TIE = 0.01  # GPU-hours: jobs of the same shape started together lose the same to a hundredth


def score_running_jobs():
    """What beat would do: score every running job the demo has telemetry for (the demo scores a few)."""
    from apps.jobs.models import Job
    from apps.saturation.services import job_saturation_refresh

    for job in Job.objects.filter(state="RUNNING").exclude(saturation__status="ready").order_by("job_id"):
        job_saturation_refresh(job)


def largest_loss(settings):
    """From the data, by the shared rule: the running wasteful jobs and what each lost, most first."""
    from apps.saturation.models import JobSaturation
    from apps.saturation.waste import gpu_hours_lost, is_wasteful

    losses = []
    for record in JobSaturation.objects.filter(job__state="RUNNING", status="ready").select_related("job"):
        job = record.job
        gpus = job.gpus or len(record.per_gpu)
        if not is_wasteful(score=record.score, gpus=gpus, idle_gpus=record.idle_gpus, score_below=settings.WASTE_SCORE_BELOW,
                           idle_share=settings.WASTE_IDLE_SHARE):
            continue
        start, end = job.run_window()
        lost = gpu_hours_lost((end - start).total_seconds() / 3600, gpus, score=record.score, idle_gpus=record.idle_gpus,
                              per_gpu=record.per_gpu).lost
        losses.append((lost, job, record))
    return sorted(losses, key=lambda row: -row[0])


def test_the_inbox_on_the_demo_ranks_lists_and_acts_in_place(live_server, page, screenshot, transactional_db, settings):
    from apps.catalog.models import Incident
    from apps.jobs.models import Job
    from apps.namespaces.models import NamespaceRequest
    from apps.telemetry.synthetic_jobs import profile_for
    from apps.triage.models import TriageItem
    from apps.triage.services import triage_sync
    from apps.vetting.models import NodeHealth, Recommendation

    settings.VETTING_ACTIONS_DRY_RUN = True
    load_demo()
    score_running_jobs()
    triage_sync()

    losses = largest_loss(settings)
    assert losses, "the demo has no wasteful running job"
    top_lost, top_job, top_record = losses[0]
    # The demo's idle-GPU job is the one: its GPUs idle, as the demo's data preparation leaves them.
    assert top_record.idle_gpus > 0 and (profile_for(top_job.name) == "idle_gpus" or "idle" in top_job.name)
    tied = {f"{job.cluster.name}/{job.job_id}" for lost, job, _ in losses if top_lost - lost <= TIE}

    log_in(page, live_server.url, "staff", "belvedere-staff", "/staff/")
    page.wait_for_url("**/staff/")
    section = page.locator("#triage")
    open_items = TriageItem.objects.filter(state__in=["new", "acknowledged"]).count()
    expect(section.locator("#triage-heading")).to_have_text(f"Needs a person: {open_items} items")
    # The verdict comes first: the inbox is above the background work.
    assert page.evaluate("document.querySelector('#triage').compareDocumentPosition(document.querySelector('#tasks-heading'))"
                         " & Node.DOCUMENT_POSITION_FOLLOWING")

    first = section.locator("li.triage-item").first
    assert first.get_attribute("data-kind") == "wasteful_job"
    first_label = first.locator(".triage-title").inner_text().split()[0]
    assert first_label in tied, (first_label, tied)
    shown = float(first.locator(".triage-lost").get_attribute("data-gpu-hours-lost"))
    assert shown == pytest.approx(top_lost, abs=0.05)
    mail = first.locator("a.triage-mail").get_attribute("href")
    assert mail.startswith("mailto:") and first_label.replace("/", "%2F") in mail and "GPU-hours" in mail.replace("%20", " ")

    # The Megatron job's stragglers.
    megatron = Job.objects.get(name="megatron-gpt-175b-pretrain", state="RUNNING")
    stragglers = section.locator("li[data-kind=straggler]", has_text=f"{megatron.cluster.name}/{megatron.job_id}")
    expect(stragglers).to_have_count(1)
    assert megatron.saturation.stragglers and megatron.saturation.stragglers[0]["reason"][:40] in stragglers.inner_text()
    # The repeat offenders (the 30-day failures rule, open or already sent to repair) and the critical node.
    offenders = set(Recommendation.objects.filter(rule__slug="vetting-failures-30d").values_list("subject", flat=True))
    offenders &= set(NodeHealth.objects.exclude(state="healthy").values_list("host", flat=True))
    critical = set(Recommendation.objects.filter(status="open", rule__slug="critical-health").values_list("subject", flat=True))
    assert offenders and critical
    for host in offenders | critical:
        expect(section.locator("li[data-kind=failing_node]", has_text=f"{host}:")).to_have_count(1)
    # The bad switch, the waiting approval, every open catalogue incident.
    [switch] = Recommendation.objects.filter(status="open", subject_kind="switch").values_list("subject", flat=True)
    expect(section.locator("li[data-kind=bad_switch]", has_text=f"Switch {switch}")).to_have_count(1)
    waiting = NamespaceRequest.objects.filter(status="waiting_approval")
    assert waiting.exists()
    for request in waiting:
        item = section.locator("li[data-kind=namespace_request]", has_text=request.number)
        expect(item.get_by_role("link", name="Approve or reject")).to_have_attribute("href", f"/namespaces/requests/{request.pk}/")
    incidents = Incident.objects.filter(closed__isnull=True).select_related("product")
    assert incidents.exists()
    expect(section.locator("li[data-kind=catalog_incident]")).to_have_count(incidents.count())
    for incident in incidents:
        expect(section.locator("li[data-kind=catalog_incident]", has_text=f"{incident.product.name}: {incident.kind}")).to_have_count(1)
    assert page.problems.take() == []

    # In place: no reload while acknowledging, resolving, muting and dry-run draining.
    page.evaluate("window.__triage_marker = 1")
    new_before = int(section.locator('[data-count-kind=straggler][data-count-state=new]').text_content())
    stragglers.get_by_role("button", name="Acknowledge").click()
    expect(stragglers.locator("[data-role=state]")).to_have_text("acknowledged")
    expect(stragglers.locator("[data-role=who]")).to_have_text("→ staff")
    assert int(section.locator('[data-count-kind=straggler][data-count-state=new]').text_content()) == new_before - 1
    straggler_item = TriageItem.objects.get(kind="straggler", job=megatron)
    assert (straggler_item.state, straggler_item.assignee.username) == ("acknowledged", "staff")

    switch_item = section.locator("li[data-kind=bad_switch]")
    switch_item.get_by_role("button", name="Resolve").click()
    expect(switch_item.locator("[data-role=state]")).to_have_text("resolved")
    assert TriageItem.objects.get(kind="bad_switch").state == "resolved"

    incident_item = section.locator("li[data-kind=catalog_incident]").first
    incident_item.locator("input[type=datetime-local]").fill("2001-01-01T00:00")
    incident_item.get_by_role("button", name="Mute until").click()
    expect(incident_item.locator("[data-role=message]")).to_contain_text("muted_until: the mute must end in the future")
    assert [problem for problem in page.problems.take() if "400" not in problem] == []  # the refused mute, as expected
    incident_item.locator("input[type=datetime-local]").fill("2099-01-01T08:00")
    incident_item.get_by_role("button", name="Mute until").click()
    expect(incident_item.locator("[data-role=state]")).to_have_text("muted")
    assert TriageItem.objects.filter(kind="catalog_incident", state="muted").count() == 1

    drainable = section.locator("li[data-kind=failing_node]", has=page.locator("button.triage-drain")).first
    host = drainable.locator("button.triage-drain").get_attribute("data-host")
    state_before = NodeHealth.objects.get(host=host).state
    drainable.locator("button.triage-drain").click()
    expect(drainable.locator("[data-role=message]")).to_contain_text(f"would drain (dry run, nothing changed): scontrol update NodeName={host} State=DRAIN")
    assert NodeHealth.objects.get(host=host).state == state_before

    assert page.evaluate("window.__triage_marker") == 1
    assert page.problems.take() == []
    section.scroll_into_view_if_needed()
    screenshot(page, "triage")

    # The fuller inbox: filtered to resolved, the switch is there, and a reload keeps every change.
    page.goto(f"{live_server.url}/staff/triage/?state=resolved")
    expect(page.locator("li.triage-item[data-kind=bad_switch]")).to_have_count(1)
    page.goto(f"{live_server.url}/staff/triage/?kind=straggler&state=acknowledged")
    expect(page.locator("li.triage-item")).to_have_count(1)
    assert page.problems.take() == []


from tests.triage.conftest import sources  # noqa: E402,F401  (the fixture: one item of each kind)


def test_the_inbox_filters_in_place(live_server, page, transactional_db, sources):  # noqa: F811
    """Changing kind or state swaps the list without loading the page (it used to submit a GET form)."""
    from apps.triage.models import TriageItem
    from apps.triage.services import triage_sync

    triage_sync()
    stragglers = TriageItem.objects.filter(kind="straggler").count()
    assert stragglers == 1 and TriageItem.objects.exclude(kind="straggler").count() > 1
    log_in(page, live_server.url, "sam", "pw-for-tests-1", "/staff/triage/")
    page.wait_for_url("**/staff/triage/")
    expect(page.locator("#triage-results li.triage-item")).to_have_count(TriageItem.objects.count())
    page.evaluate("window.__triage_marker = 1")

    page.locator("#filter-kind").select_option("straggler")
    expect(page.locator("#triage-results li.triage-item")).to_have_count(stragglers)
    expect(page.locator("#triage-results li.triage-item").first).to_have_attribute("data-kind", "straggler")
    assert "kind=straggler" in page.url
    page.locator("#filter-state").select_option("resolved")
    expect(page.locator("#triage-results li.triage-item")).to_have_count(0)
    expect(page.locator("#triage-results")).to_contain_text("Nothing needs a person")
    assert "state=resolved" in page.url
    assert page.evaluate("window.__triage_marker") == 1  # no navigation happened
    # the list that came in place still acts in place
    page.locator("#filter-state").select_option("open")
    item = page.locator("#triage-results li.triage-item").first
    opened = TriageItem.objects.filter(state__in=["new", "acknowledged"]).count()
    expect(page.locator("h1")).to_have_text(f"Triage inbox: {opened} open items")
    item.get_by_role("button", name="Resolve").click()
    expect(item.locator("[data-role=state]")).to_have_text("resolved")
    expect(page.locator("h1")).to_have_text(f"Triage inbox: {opened - 1} open items")  # the verdict follows in place
    item.get_by_role("button", name="Reopen").click()
    expect(page.locator("h1")).to_have_text(f"Triage inbox: {opened} open items")
    item.get_by_role("button", name="Resolve").click()
    expect(page.locator("h1")).to_have_text(f"Triage inbox: {opened - 1} open items")
    assert TriageItem.objects.get(kind="straggler").state == "resolved"
    assert page.evaluate("window.__triage_marker") == 1
    assert page.problems.take() == []


def test_a_mute_typed_outside_utc_ends_at_the_utc_time_typed(live_server, browser, transactional_db,
                                                             sources):  # noqa: F811
    """The mute field is UTC, with or without the script (the script used to read it in the browser's zone)."""
    from datetime import datetime, timezone

    from apps.triage.models import TriageItem
    from apps.triage.services import triage_sync

    triage_sync()
    context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="Europe/Zurich")
    try:
        page = context.new_page()
        log_in(page, live_server.url, "sam", "pw-for-tests-1", "/staff/triage/?kind=catalog_incident")
        page.wait_for_url("**/staff/triage/**")
        item = page.locator("li.triage-item[data-kind=catalog_incident]")
        item.locator("input[type=datetime-local]").fill("2099-01-01T08:00")
        item.get_by_role("button", name="Mute until").click()
        expect(item.locator("[data-role=state]")).to_have_text("muted")
        expect(item.locator("[data-role=who]")).to_contain_text("until 01-01 08:00 UTC")
        muted = TriageItem.objects.get(kind="catalog_incident").muted_until
        assert muted == datetime(2099, 1, 1, 8, 0, tzinfo=timezone.utc)
    finally:
        context.close()
