"""Namespaces in Chromium on the demo, issue 23: the approver decides on the facts (manifests, diff, the team's
use against its envelope, the cluster's capacity, the purpose) and a production approval takes a note and a
confirmation, after which the request's page follows the worker in place; the form shows a field's problems
only once it was touched or submitted and asks the host name once; a teardown waits for the namespace's
name; a status refresh without Argo CD keeps the failed namespace's reason."""
import pytest
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.mark.django_db(transaction=True)
def test_the_approver_decides_on_the_facts(live_server, page, screenshot, celery_worker_process):
    load_demo()
    log_in(page, live_server.url, "staff", "belvedere-staff", "/namespaces/approvals/")
    queue = page.locator("#approval-queue tbody tr")
    expect(queue.first).to_contain_text("The model endpoint the partner institutions call")  # the purpose, in the queue
    queue.first.get_by_role("link").first.click()
    facts = page.locator("#approval-facts")
    expect(facts).to_be_visible()
    expect(page.locator("#facts-verdict")).to_contain_text("A production namespace: approving takes a note and a confirmation.")
    expect(page.locator("#facts-purpose")).to_have_text("The model endpoint the partner institutions call")
    # the manifests and their diff against the repository (a new namespace: every file is new)
    expect(page.locator("#facts-manifests")).to_contain_text("requests.nvidia.com/gpu: '2'")
    expect(page.locator("#facts-diff .diff-file").first).to_have_text("--- /dev/null")
    expect(page.locator("#facts-diff")).to_contain_text("+++ b/tenants/a-bio06/namespaces/a-bio06-serving/10-resourcequota.yaml")
    # the team's use against its envelope: a-bio06 holds 3 whole GPUs (ray 2, vllm 1) of its 4, asks 2 more
    gpu_row = page.locator("#facts-envelope tr", has=page.locator("th", has_text="nvidia.com/gpu"))
    expect(gpu_row.locator("td")).to_have_text(["4", "3", "2", "5 over"])
    expect(gpu_row).to_have_class("row-over")
    # the cluster after the request: 24 H100s, 3 in use, 2 asked, 19 left
    h100 = page.locator("#facts-capacity tr", has=page.locator("th", has_text="NVIDIA H100 SXM 80GB · whole GPUs"))
    expect(h100.locator("td")).to_have_text(["24", "3", "2", "19"])
    ceph = page.locator("#facts-capacity tr", has=page.locator("th", has_text="storage · ceph-rbd"))
    expect(ceph.locator("td").first).to_have_text("100Ti")
    facts.scroll_into_view_if_needed()
    screenshot(page, "namespaces-approval-facts")

    # production: the note and the confirmation, asked in place
    page.locator("#d-approve").click()
    expect(page.locator("#d-hint")).to_have_text("Approving a production namespace takes a note saying what you checked and the confirmation.")
    page.locator("#d-reason").fill("70B endpoint: GPUs checked against the envelope and the cluster")
    page.locator("#d-approve").click()
    expect(page.locator("#d-hint")).to_have_text("Approving a production namespace takes the confirmation.")
    screenshot(page, "namespaces-approval-production-asks")
    page.locator("#d-confirm").check()
    page.locator("#d-approve").click()
    expect(page.locator(".messages")).to_contain_text("approved")
    # the page follows the worker's commit in place (no reload)
    page.evaluate("window.__sameDocument = true")
    expect(page.locator("#req-status")).to_have_text("committed", timeout=60_000)
    assert page.evaluate("window.__sameDocument") is True
    expect(page.locator("#req-diff")).to_be_attached()
    expect(page.locator(".steps")).to_contain_text("approved by staff: 70B endpoint: GPUs checked against the envelope and the cluster")
    screenshot(page, "namespaces-approval-committed-live")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_the_form_speaks_when_spoken_to_and_asks_the_host_name_once(live_server, page, screenshot):
    load_demo()
    log_in(page, live_server.url, "demo", "belvedere-demo", "/namespaces/new/")
    form = page.locator("#ns-form")
    expect(page.locator("#ns-verdict")).to_contain_text("still to fill in: Name")  # the first check has answered
    assert form.locator(".field-error").all_inner_texts() == [""] * form.locator(".field-error").count()
    assert form.locator("[aria-invalid]").count() == 0
    screenshot(page, "namespaces-form-untouched")

    # a field left empty speaks once left; the others stay quiet
    page.locator("#f-purpose").focus()
    page.locator("#f-contacts").focus()
    expect(form.locator('.field-error[data-for="purpose"]')).not_to_have_text("")
    expect(form.locator('.field-error[data-for="name"]')).to_have_text("")

    # the host name, typed once, is what the service offers
    page.fill("#f-hostnames", "a-astro10-board.svc.alps.example.org")
    page.locator("#f-bp_mlflow").check()
    picker = page.locator("#f-bp_mlflow_hostname")
    expect(picker.locator("option")).to_have_text(["a-astro10-board.svc.alps.example.org (the first host name above)",
                                                   "a-astro10-board.svc.alps.example.org"])
    expect(form.locator('.field-error[data-for="bp_mlflow_hostname"]')).to_have_text("")
    screenshot(page, "namespaces-form-hostname-once")

    # submitting shows every problem, in place (once the last edit was checked: before, the server checks)
    expect(page.locator("#ns-form[data-pending]")).to_have_count(0)
    page.locator("#ns-submit").click()
    expect(form.locator('.field-error[data-for="name"]')).to_contain_text("required")
    expect(form.locator('.field-error[data-for="expires"]')).to_contain_text("required")
    expect(page.locator("#ns-verdict")).to_contain_text("problems to fix")
    assert page.url.endswith("/namespaces/new/")
    screenshot(page, "namespaces-form-submitted")
    assert page.problems.take() == []


@pytest.mark.django_db(transaction=True)
def test_teardown_waits_for_the_name_and_a_refresh_keeps_the_failure(live_server, page, screenshot, settings):
    from apps.namespaces.models import ManagedNamespace
    from apps.namespaces.tasks import refresh_statuses_task

    load_demo()
    settings.ARGOCD_URL = ""
    failed = ManagedNamespace.objects.get(name="a-bio06-vllm")
    reason = failed.status_message
    for _ in range(3):  # three beats of the refresher, without Argo CD
        refresh_statuses_task.apply().get()
    log_in(page, live_server.url, "demo", "belvedere-demo", "/namespaces/")
    row = page.locator("#namespaces tbody tr", has=page.locator("a", has_text="a-bio06-vllm"))
    expect(row.locator("td").nth(3)).to_have_text("failed")
    expect(row.locator("td").nth(6)).to_contain_text("sync failed")
    page.goto(f"{live_server.url}/namespaces/a-bio06-vllm/")
    expect(page.locator("#ns-state")).to_have_text("failed")
    expect(page.locator("#ns-status")).to_have_text(reason)
    expect(page.locator("#ns-argo")).to_contain_text("not configured")
    expect(page.locator("#ns-argo")).to_contain_text("OutOfSync · Degraded")
    expect(page.locator("#ns-remark")).to_contain_text("no Argo CD configured: nothing reports whether this was fixed")
    screenshot(page, "namespaces-failed-after-refresh")

    page.goto(f"{live_server.url}/namespaces/a-astro10-chat/")
    expect(page.locator("#ns-state")).to_have_text("committed")
    expect(page.locator("#ns-status")).to_contain_text("no Argo CD to report sync")
    page.locator(".danger-zone summary").click()
    button = page.locator("#td-submit")
    page.fill("#td-reason", "evaluation finished")
    expect(button).to_be_disabled()
    page.fill("#td-confirm", "a-astro10-cha")
    expect(button).to_be_disabled()
    page.fill("#td-confirm", "a-astro10-chat")
    expect(button).to_be_enabled()
    screenshot(page, "namespaces-teardown-typed")
    button.click()
    expect(page.locator("#ns-state")).to_have_text("tearing down")
    assert page.problems.take() == []
