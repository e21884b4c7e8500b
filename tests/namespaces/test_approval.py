"""Approvals with the facts (issue 23): the team's use against its envelope and the cluster's capacity after a
request (plain ``facts.py``), the request page an approver sees (manifests, diff, usage, capacity, purpose),
production approvals that take a note and a confirmation, teardown confirmed by the namespace's name, the
request page's self-updating part, the host name asked once, and the staff page's "what waits" count."""
from decimal import Decimal

import pytest

from apps.namespaces import facts
from apps.namespaces.forms import spec_from_form
from apps.namespaces.models import ManagedNamespace, NamespaceRequest
from apps.namespaces.quantities import parse_quantity
from apps.namespaces.services import NotAllowed, commit, decide, inventory, submit, teardown_request
from apps.namespaces.spec import Usage, usage_of
from tests.namespaces.conftest import request_spec, typical

# ------------------------------------------------------------------ the facts, plain


def test_envelope_rows_add_the_request_to_what_the_team_holds(inventory):
    team_other = usage_of({**typical(), "quota": {"cpu": {"requests": "40"}, "memory": {"requests": "100Gi"},
                                                  "gpus": [{"model": "h100", "profile": "whole", "count": 1}]}}, inventory)
    asked = usage_of({**typical(), "quota": {"cpu": {"requests": "32"}, "memory": {"requests": "64Gi"},
                                             "gpus": [{"model": "h100", "profile": "whole", "count": 2}],
                                             "storage": {"ceph-rbd": {"size": "200Gi"}}}}, inventory)
    rows = {row.resource: row for row in facts.envelope_rows(team_other=team_other, current=Usage(), asked=asked,
                                                             envelope=inventory.default_envelope, namespaces_other=1, new_namespace=True)}
    assert rows["CPU (cores)"] == facts.EnvelopeRow("CPU (cores)", "64", "40", "32", "72", over=True, touched=True)
    assert rows["memory"] == facts.EnvelopeRow("memory", "256Gi", "100Gi", "64Gi", "164Gi", over=False, touched=True)
    assert rows["nvidia.com/gpu"] == facts.EnvelopeRow("nvidia.com/gpu", "2", "1", "2", "3", over=True, touched=True)
    assert rows["nvidia.com/mig-1g.12gb"].touched is False and rows["nvidia.com/mig-1g.12gb"].over is False
    assert rows["storage · ceph-rbd"].after == "200Gi" and not rows["storage · ceph-rbd"].over
    assert rows["namespaces"] == facts.EnvelopeRow("namespaces", "4", "1", "1", "2", over=False, touched=True)


def test_a_change_replaces_what_its_namespace_holds(inventory):
    current = usage_of({**typical(), "quota": {"cpu": {"requests": "8"}, "memory": {"requests": "8Gi"}}}, inventory)
    asked = usage_of({**typical(), "quota": {"cpu": {"requests": "12"}, "memory": {"requests": "8Gi"}}}, inventory)
    rows = {row.resource: row for row in facts.envelope_rows(team_other=Usage(), current=current, asked=asked,
                                                             envelope={"cpu": "10", "namespaces": 4}, namespaces_other=0, new_namespace=False)}
    assert (rows["CPU (cores)"].now, rows["CPU (cores)"].after, rows["CPU (cores)"].over) == ("8", "12", True)
    assert (rows["namespaces"].now, rows["namespaces"].after) == ("1", "1")


def test_capacity_rows_say_what_the_cluster_has_left(inventory):
    other = usage_of({**typical(), "quota": {"cpu": {"requests": "1"}, "memory": {"requests": "1Gi"},
                                             "gpus": [{"model": "h100", "profile": "whole", "count": 20}],
                                             "storage": {"ceph-rbd": {"size": "99Ti"}}}}, inventory)
    asked = usage_of({**typical(), "quota": {"cpu": {"requests": "1"}, "memory": {"requests": "1Gi"},
                                             "gpus": [{"model": "h100", "profile": "whole", "count": 6},
                                                      {"model": "h100", "profile": "1g.10gb", "count": 3}],
                                             "storage": {"ceph-rbd": {"size": "2Ti"}}}}, inventory)
    rows = {row.resource: row for row in facts.capacity_rows(inventory, cluster_other=other, current=Usage(), asked=asked)}
    assert rows["NVIDIA H100 SXM 80GB · whole GPUs"] == facts.CapacityRow("NVIDIA H100 SXM 80GB · whole GPUs", "24", "20", "6", "-2",
                                                                          over=True, touched=True)
    assert rows["NVIDIA H100 SXM 80GB · MIG 1g.10gb"] == facts.CapacityRow("NVIDIA H100 SXM 80GB · MIG 1g.10gb", "28", "0", "3", "25",
                                                                           over=False, touched=True)
    assert rows["NVIDIA GH200 96GB · MIG 3g.48gb"].touched is False
    storage = rows["storage · ceph-rbd"]
    assert (storage.capacity, storage.used_now, storage.asked, storage.left_after, storage.over) == ("100Ti", "99Ti", "2Ti", "−1 TiB (short)", True)
    assert inventory.storage_capacity["longhorn"] == parse_quantity("20Ti") == Decimal(20 * 2**40)


# ------------------------------------------------------------------ the approver's page


def prod_spec(**changes):
    return request_spec(name="prod", environment="prod", hostnames=["a-llm01-prod.svc.alps.example.org"],
                        quota={"cpu": {"requests": "16", "limits": "32"}, "memory": {"requests": "64Gi"},
                               "gpus": [{"model": "h100", "profile": "whole", "count": 3}], "storage": {"ceph-rbd": {"size": "200Gi"}}},
                        blueprints=[{"id": "inference", "params": {"hostname": "a-llm01-prod.svc.alps.example.org",
                                                                   "model": "meta-llama/Llama-3.1-70B-Instruct", "gpus": 3}}],
                        purpose="The endpoint the partner institutions call", **changes)


@pytest.fixture
def waiting(world):
    commit(submit(request_spec(), world["alice"]))  # what the team holds already
    request = submit(prod_spec(), world["alice"])
    assert request.status == "waiting_approval"
    return request


def test_the_approver_sees_manifests_diff_usage_capacity_and_purpose(waiting, world, client):
    client.force_login(world["lena"])
    page = client.get(f"/namespaces/requests/{waiting.pk}/").content.decode()
    assert 'id="approval-facts"' in page
    assert "Fits the cluster; beyond the team's envelope on nvidia.com/gpu." in page
    assert "A production namespace: approving takes a note and a confirmation." in page
    assert '<blockquote id="facts-purpose">The endpoint the partner institutions call</blockquote>' in page
    assert "requests.nvidia.com/gpu: &#x27;3&#x27;" in page  # the rendered ResourceQuota
    assert 'id="facts-diff"><span class="diff-file">--- /dev/null</span>' in page
    assert '+++ b/tenants/a-llm01/namespaces/a-llm01-prod/10-resourcequota.yaml' in page
    # the team's use: CPU 16 (mlflow's limit) now, 32 more, 48 after; GPUs over the envelope
    assert '<tr class="row-over"><th scope="row">nvidia.com/gpu</th><td class="num">2</td><td class="num">0</td><td class="num">3</td>' in page
    assert '<th scope="row">CPU (cores)</th><td class="num">64</td><td class="num">16</td><td class="num">32</td>' in page
    # the cluster: 24 H100s, 3 asked, 21 left; 100Ti of ceph-rbd
    assert '<th scope="row">NVIDIA H100 SXM 80GB · whole GPUs</th><td class="num">24</td><td class="num">0</td><td class="num">3</td><td class="num">21</td>' in page
    assert '<th scope="row">storage · ceph-rbd</th><td class="num">100Ti</td>' in page
    assert "{&#x27;team&#x27;" not in page  # no Python dict
    assert "environment: prod" in page  # the request as YAML


def test_a_change_request_shows_its_diff_against_what_is_committed(world, client):
    commit(submit(request_spec(), world["alice"]))
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    bigger = {**namespace.spec, "quota": {**namespace.spec["quota"], "gpus": [{"model": "h100", "profile": "1g.10gb", "count": 6}]}}
    change = submit(bigger, world["alice"], namespace=namespace)
    assert change.status == "waiting_approval"
    client.force_login(world["lena"])
    page = client.get(f"/namespaces/requests/{change.pk}/").content.decode()
    assert '<span class="diff-remove">-    requests.nvidia.com/mig-1g.10gb: &#x27;2&#x27;</span>' in page
    assert '<span class="diff-add">+    requests.nvidia.com/mig-1g.10gb: &#x27;6&#x27;</span>' in page
    assert "Namespace after" in page
    assert '<th scope="row">nvidia.com/mig-1g.10gb</th><td class="num">4</td><td class="num">2</td><td class="num">6</td><td class="num">6 <strong' in page


def test_a_production_approval_without_a_note_is_refused(waiting, world):
    with pytest.raises(NotAllowed, match=r"is a prod namespace: approving it takes a note saying what you checked"):
        decide(waiting, world["lena"], approve=True, reason="  ")
    with pytest.raises(NotAllowed, match="tick the confirmation"):
        decide(waiting, world["lena"], approve=True, reason="checked", confirmed=False)
    waiting.refresh_from_db()
    assert waiting.status == "waiting_approval"
    decide(waiting, world["lena"], approve=True, reason="70B endpoint reviewed; GPUs reserved with the team")
    assert waiting.status == "approved" and waiting.decision_reason == "70B endpoint reviewed; GPUs reserved with the team"


def test_a_development_approval_needs_no_note(world):
    beyond = submit(request_spec(quota={**request_spec()["quota"], "gpus": [{"model": "h100", "profile": "whole", "count": 3}]},
                                 blueprints=[]), world["alice"])
    assert beyond.status == "waiting_approval"
    decide(beyond, world["lena"], approve=True)
    assert beyond.status == "approved"


def test_the_page_and_the_api_refuse_a_production_approval_without_note_or_confirmation(waiting, world, client, api_client):
    client.force_login(world["lena"])
    url = f"/namespaces/requests/{waiting.pk}/"
    page = client.get(url).content.decode()
    assert 'name="confirm"' in page and "Note (required: what you checked; it is recorded)" in page
    answer = client.post(url, {"decision": "approve", "reason": ""}, follow=True).content.decode()
    assert "is a prod namespace: approving it takes a note saying what you checked" in answer
    answer = client.post(url, {"decision": "approve", "reason": "checked"}, follow=True).content.decode()
    assert "tick the confirmation that you checked the manifests" in answer
    waiting.refresh_from_db()
    assert waiting.status == "waiting_approval"
    api_client.force_authenticate(world["lena"])
    refused = api_client.post(f"/api/v1/namespaces/requests/{waiting.pk}/approve/", {}, format="json")
    assert refused.status_code == 409 and "approving it takes a note" in refused.json()["detail"]
    client.post(url, {"decision": "approve", "reason": "checked the endpoint", "confirm": "1"})
    waiting.refresh_from_db()
    assert waiting.status in ("approved", "committed") and waiting.decision_reason == "checked the endpoint"


# ------------------------------------------------------------------ teardown, typed


def test_teardown_takes_the_namespace_name(world, client):
    commit(submit(request_spec(), world["alice"]))
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    with pytest.raises(NotAllowed, match=r"type the namespace's name, a-llm01-mlflow, to confirm the teardown \('a-llm01' is not it\)"):
        teardown_request(namespace, world["alice"], backup=False, reason="done", confirm="a-llm01")
    client.force_login(world["alice"])
    page = client.get("/namespaces/a-llm01-mlflow/").content.decode()
    assert 'name="confirm_name"' in page and 'data-expected="a-llm01-mlflow"' in page
    answer = client.post("/namespaces/a-llm01-mlflow/", {"action": "teardown", "reason": "done"}, follow=True).content.decode()
    assert "type the namespace&#x27;s name, a-llm01-mlflow, to confirm the teardown; nothing was torn down" in answer
    namespace.refresh_from_db()
    assert namespace.state == "committed" and not NamespaceRequest.objects.filter(kind="teardown").exists()
    client.post("/namespaces/a-llm01-mlflow/", {"action": "teardown", "reason": "done", "confirm_name": "a-llm01-mlflow"})
    namespace.refresh_from_db()
    assert namespace.state == "tearing_down"


def test_the_api_teardown_checks_a_confirm_when_given(world, api_client):
    commit(submit(request_spec(), world["alice"]))
    api_client.force_authenticate(world["alice"])
    wrong = api_client.post("/api/v1/namespaces/a-llm01-mlflow/teardown/", {"reason": "done", "confirm": "mlflow"}, format="json")
    assert wrong.status_code == 409 and "type the namespace's name, a-llm01-mlflow" in wrong.json()["detail"]


# ------------------------------------------------------------------ the page that updates itself


def test_the_request_page_has_a_live_part(world, client):
    request = submit(request_spec(), world["alice"])
    client.force_login(world["alice"])
    page = client.get(f"/namespaces/requests/{request.pk}/").content.decode()
    assert f'data-live-url="/namespaces/requests/{request.pk}/live/"' in page and 'data-status="approved" data-final=""' in page
    commit(request)
    fragment = client.get(f"/namespaces/requests/{request.pk}/live/").content.decode()
    assert fragment.startswith('<div class="req-live-state" data-status="committed" data-final="1">')
    assert 'id="req-status">committed<' in fragment and 'id="req-diff"' in fragment and "<html" not in fragment
    client.force_login(world["bob"])
    assert client.get(f"/namespaces/requests/{request.pk}/live/").status_code == 404


# ------------------------------------------------------------------ the host name, asked once


def test_a_service_takes_the_namespace_host_name_unless_another_is_picked(inventory):
    form = {"team": "a-llm01", "name": "mlflow", "hostnames": "a-llm01-mlflow.svc.alps.example.org\na-llm01-ml2.svc.alps.example.org",
            "bp_mlflow": "on", "bp_mlflow_hostname": ""}
    assert spec_from_form(form, inventory)["blueprints"] == [{"id": "mlflow", "params": {"hostname": "a-llm01-mlflow.svc.alps.example.org"}}]
    picked = spec_from_form({**form, "bp_mlflow_hostname": "a-llm01-ml2.svc.alps.example.org"}, inventory)
    assert picked["blueprints"][0]["params"]["hostname"] == "a-llm01-ml2.svc.alps.example.org"
    assert spec_from_form({**form, "hostnames": ""}, inventory)["blueprints"] == [{"id": "mlflow", "params": {}}]


def test_the_form_offers_the_host_names_instead_of_a_second_field(world, client):
    client.force_login(world["alice"])
    page = client.get("/namespaces/new/").content.decode()
    assert '<select id="f-bp_mlflow_hostname" name="bp_mlflow_hostname" class="hostname-pick"' in page
    assert '<input id="f-bp_mlflow_hostname"' not in page


# ------------------------------------------------------------------ what waits for staff


def test_the_approvals_count_is_registered_for_the_staff_page(waiting, world, rf):
    from django.urls import reverse

    from apps.core.waiting import waiting_entries

    entry = next(entry for entry in waiting_entries() if entry.key == "approvals")
    assert entry.label == "namespace requests to approve" and reverse(entry.url_name) == "/namespaces/approvals/"
    asked = {}
    for who in ("lena", "sam", "alice"):
        request = rf.get("/staff/")
        request.user = world[who]
        asked[who] = entry.count(request)
    assert asked == {"lena": 1, "sam": 0, "alice": 0}  # lena is a-llm01's named approver


def test_the_staff_page_counts_the_requests_waiting_for_this_approver(waiting, world, client):
    import re

    client.force_login(world["lena"])
    page = client.get("/staff/").content.decode()
    item = re.search(r'<li class="waiting-item waiting-item--(\w+)" data-waiting="approvals">(.*?)</li>', page, re.S)
    assert item and item.group(1) == "some", page[:2000]
    assert 'href="/namespaces/approvals/"' in item.group(2) and '<span class="waiting-item__count">1</span>' in item.group(2)
    client.force_login(world["sam"])  # not a-llm01's named approver: nothing waits for him
    item = re.search(r'data-waiting="approvals">(.*?)</li>', client.get("/staff/").content.decode(), re.S)
    assert '<span class="waiting-item__count">0</span>' in item.group(1)
