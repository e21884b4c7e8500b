"""Namespaces in Chromium on the demo: the request form's dependent fields and inline errors, its live
preview, submission committed by the real worker, a day-2 change's diff, and a staff approval."""
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def wait_for_status(page, url, wanted, timeout_s=60):
    """A request's page updates itself in place while the worker moves the request on: no reload."""
    assert page.url == url
    expect(page.locator("#req-status")).to_have_text(wanted, timeout=timeout_s * 1000)


@pytest.mark.django_db(transaction=True)
def test_request_form_change_and_approval(live_server, page, screenshot, celery_worker_process):
    from apps.namespaces.models import NamespaceRequest

    load_demo()
    log_in(page, live_server.url, "demo", "belvedere-demo", "/namespaces/")
    states = dict(zip(page.locator("#namespaces tbody tr td:nth-child(1)").all_inner_texts(),
                      page.locator("#namespaces tbody tr td:nth-child(4)").all_inner_texts()))
    assert states == {"a-astro10-chat": "syncing", "a-astro10-mlflow": "ready", "a-bio06-ray": "ready", "a-bio06-vllm": "failed"}
    expect(page.locator("#main, main").first).to_contain_text("a-bio06-serving")  # the request waiting for approval
    screenshot(page, "namespaces-index")

    # --- the form: dependent fields ---------------------------------------------------------------
    page.get_by_role("link", name="Request a namespace").click()
    form = page.locator("#ns-form")
    expect(page.locator("#name-prefix")).to_have_text("a-astro10-")
    expect(page.locator("#f-gpu_profile_0")).to_be_disabled()  # no model chosen yet (the script sets it: wait for it)
    page.select_option("#f-gpu_model_0", "gh200")
    assert page.locator("#f-gpu_profile_0 option").all_inner_texts() == ["whole GPUs (7 left)", "MIG 1g.12gb (14 left)",
                                                                          "MIG 3g.48gb (4 left)"]  # one GH200 is a-astro10-chat's
    page.select_option("#f-gpu_profile_0", "1g.12gb")
    expect(page.locator('.gpu-row[data-row="0"] .gpu-left')).to_have_text("14 of 14 left on the cluster")
    page.select_option("#f-environment", "prod")
    expect(page.locator("#f-storage_longhorn_size")).to_be_disabled()
    expect(page.locator('.storage-class[data-class="longhorn"] .storage-note')).to_have_text("not offered in prod")
    assert not page.locator("#psa-reason").is_visible()
    page.select_option("#f-psa", "baseline")
    assert page.locator("#psa-reason").is_visible()
    page.select_option("#f-team", "a-bio06")
    expect(page.locator("#name-prefix")).to_have_text("a-bio06-")
    page.select_option("#f-team", "a-astro10")

    # --- inline errors from the live check ----------------------------------------------------------
    page.fill("#f-name", "ML_flow")
    page.fill("#f-cpu_requests", "32")
    page.fill("#f-cpu_limits", "16")
    page.fill("#f-gpu_count_0", "20")
    expect(form.locator('.field-error[data-for="name"]')).to_contain_text("lowercase letters a-z, digits and '-'")
    expect(form.locator('.field-error[data-for="cpu_requests"]')).to_have_text("32 is more than the limit 16")
    expect(form.locator('.field-error[data-for="gpu_count_0"]')).to_have_text(
        "20 1g.12gb slices of NVIDIA GH200 96GB asked, 14 left on the cluster")
    # a field not touched yet shows no error; leaving it does
    expect(page.locator("#ns-verdict")).to_contain_text("problems to fix")
    expect(form.locator('.field-error[data-for="psa_justification"]')).to_have_text("")
    page.locator("#f-psa_justification").focus()
    page.locator("#f-name").focus()
    expect(form.locator('.field-error[data-for="psa_justification"]')).to_have_text("required")
    assert page.locator("#f-name").get_attribute("aria-invalid") == "true"
    expect(page.locator("#ns-verdict")).to_contain_text("problems to fix")
    screenshot(page, "namespaces-form-errors")

    # --- fixed: valid, inside the envelope, with the manifests ---------------------------------------
    page.select_option("#f-environment", "dev")
    page.select_option("#f-psa", "restricted")
    page.fill("#f-name", "eval")
    page.fill("#f-purpose", "Evaluation harness workers for the nightly checkpoints")
    page.fill("#f-contacts", "dana.demo@example.org")
    page.fill("#f-expires", (timezone.now().date() + timedelta(days=200)).isoformat())
    page.fill("#f-cpu_requests", "4")
    page.fill("#f-memory_requests", "16Gi")
    page.fill("#f-memory_limits", "32Gi")
    page.fill("#f-gpu_count_0", "2")
    page.fill("#f-storage_longhorn_size", "50Gi")
    expect(page.locator("#ns-verdict")).to_have_text("inside your envelope: approved at once")
    expect(page.locator("#preview-manifests")).to_contain_text("requests.nvidia.com/mig-1g.12gb: '2'")
    expect(page.locator("#preview-diff")).to_contain_text("+++ b/tenants/a-astro10/namespaces/a-astro10-eval/10-resourcequota.yaml")
    assert form.locator(".field-error").all_inner_texts() == [""] * form.locator(".field-error").count()
    screenshot(page, "namespaces-form-preview")
    expect(page.locator("#preview-state")).not_to_have_text("Checking…")  # the last live check has answered
    page.locator("#ns-submit").click()
    page.wait_for_url("**/namespaces/requests/*/")
    request_url = page.url
    wait_for_status(page, request_url, "committed")  # the Celery worker wrote and committed the directory
    expect(page.locator("#req-diff")).to_contain_text("+    requests.nvidia.com/mig-1g.12gb: '2'")
    screenshot(page, "namespaces-request-committed")

    # --- day 2: the same form, pre-filled, with the diff against the repository ---------------------
    page.goto(f"{live_server.url}/namespaces/a-astro10-eval/")
    expect(page.locator("#ns-history")).to_contain_text("committed; no Argo CD configured")
    page.get_by_role("link", name="Change (quota, services, network)").click()
    assert page.locator("#f-name").input_value() == "eval" and page.locator("#f-memory_limits").input_value() == "32Gi"
    # the namespace's own two slices count as available to its change
    expect(page.locator('.gpu-row[data-row="0"] .gpu-left')).to_have_text("14 of 14 left on the cluster")
    page.fill("#f-memory_limits", "64Gi")
    expect(page.locator("#preview-diff")).to_contain_text("-    limits.memory: 32Gi\n+    limits.memory: 64Gi")
    screenshot(page, "namespaces-change-diff")
    expect(page.locator("#preview-state")).not_to_have_text("Checking…")
    page.locator("#ns-submit").click()
    page.wait_for_url("**/namespaces/requests/*/")
    wait_for_status(page, page.url, "committed")
    assert NamespaceRequest.objects.filter(name="a-astro10-eval", kind="change", status="committed").exists()
    expect(page.locator("#req-diff .diff-add")).to_contain_text(["+    limits.memory: 64Gi"])
    screenshot(page, "namespaces-change-committed")

    # --- a namespace whose sync failed says why, per application and resource ---------------------------
    page.goto(f"{live_server.url}/namespaces/a-bio06-vllm/")
    expect(page.locator("#ns-state")).to_have_text("failed")
    expect(page.locator("#ns-status")).to_contain_text("exceeded quota: belvedere-quota")
    expect(page.locator("#ns-apps")).to_contain_text("SyncError")
    screenshot(page, "namespaces-detail-failed")

    # --- staff: the approval queue ------------------------------------------------------------------
    page.context.clear_cookies()
    log_in(page, live_server.url, "staff", "belvedere-staff", "/namespaces/approvals/")
    queue = page.locator("#approval-queue tbody tr")
    expect(queue).to_have_count(1)
    expect(queue.first).to_contain_text("a-bio06-serving")
    expect(queue.first).to_contain_text("prod namespaces are approved by a person")
    queue.first.get_by_role("link").first.click()
    expect(page.locator("#approval-facts")).to_be_visible()
    page.get_by_label("Note (required: what you checked; it is recorded)").fill("endpoint reviewed with the team")
    page.locator("#d-confirm").check()
    page.locator("#d-approve").click()
    expect(page.locator(".messages")).to_contain_text("approved")
    wait_for_status(page, page.url, "committed")
    expect(page.locator(".steps")).to_contain_text("approved by staff: endpoint reviewed with the team")
    screenshot(page, "namespaces-approved")
    assert page.problems.take() == []
