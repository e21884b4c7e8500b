"""The namespaces API: every rule through the dry run, submissions, decisions, and bad input."""
import copy
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.namespaces.models import ManagedNamespace, NamespaceRequest
from apps.namespaces.services import commit, repository
from tests.namespaces.conftest import DIRECTORY, request_spec
from tests.namespaces.test_spec import RULES, changed

URL = "/api/v1/namespaces/requests/"


@pytest.fixture
def alice(world, api_client):
    api_client.force_authenticate(world["alice"])
    return api_client


def _api_value(value):
    """Dates in the rules are relative to the test's fixed day; through the API they are relative to today."""
    if value == "2030-01-01":
        return (timezone.now().date() + timedelta(days=800)).isoformat()
    return value


@pytest.mark.parametrize("path, value, field, text", RULES)
def test_every_rule_through_the_dry_run(alice, path, value, field, text):
    response = alice.post(f"{URL}?dry_run=1", changed(path, _api_value(value), base=request_spec()), format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False and body["manifests"] == "" and body["files"] == {}
    found = {p["field"]: p["message"] for p in body["problems"]}
    assert field in found, found
    assert text in found[field]
    assert not NamespaceRequest.objects.exists()


def test_a_valid_dry_run_shows_manifests_and_the_diff_and_stores_nothing(alice):
    response = alice.post(f"{URL}?dry_run=1", request_spec(), format="json")
    body = response.json()
    assert body["valid"] is True and body["problems"] == [] and body["needs_approval"] == [] and body["approvers"] == ["lena"]
    assert body["name"] == "a-llm01-mlflow" and body["change_of"] is None
    assert sorted(body["files"]) == ["00-namespace.yaml", "10-resourcequota.yaml", "11-limitrange.yaml", "20-networkpolicy.yaml",
                                     "30-rolebinding.yaml", "40-appproject.yaml", "50-application-mlflow.yaml", "README.md"]
    assert "kind: ResourceQuota" in body["manifests"]
    assert f"+++ b/{DIRECTORY}/10-resourcequota.yaml" in body["diff"]  # everything is new
    assert not NamespaceRequest.objects.exists() and not (repository().path / "tenants").exists()


def test_submit_refuse_and_wait(alice, world):
    created = alice.post(URL, request_spec(), format="json")
    assert created.status_code == 201
    body = created.json()
    assert (body["status"], body["name"], body["requested_by"]) == ("approved", "a-llm01-mlflow", "alice")
    assert [e["to"] for e in body["events"]] == ["draft", "approved"]
    refused = alice.post(URL, request_spec(name="Bad_Name", psa="privileged"), format="json")
    assert refused.status_code == 400
    error = refused.json()
    assert error["detail"].startswith("2 problems in the request: name: lowercase letters")
    assert {(e["field"], e["message"]) for e in error["errors"]} >= {
        ("psa", "privileged pods are never self-service: ask the platform team, with the reason")}
    prod = request_spec(name="prod", environment="prod", hostnames=[], blueprints=[],
                        quota={"cpu": {"requests": "4"}, "memory": {"requests": "8Gi"}})
    waiting = alice.post(URL, prod, format="json").json()
    assert waiting["status"] == "waiting_approval" and waiting["approvers"] == ["lena"]
    listed = alice.get(URL).json()
    assert [r["name"] for r in listed] == ["a-llm01-prod", "a-llm01-mlflow"]


def test_a_trailing_newline_is_refused_not_stored(alice):
    """Issue 16 item 7: "tracking\\n" was stored (201) because the patterns ended in "$" and used re.match."""
    spec = request_spec(name="tracking\n", contacts=["jane.doe@example.org\n"],
                        hostnames=["a-llm01-tracking\n.svc.alps.example.org"], blueprints=[])
    refused = alice.post(URL, spec, format="json")
    assert refused.status_code == 400, refused.content
    assert {e["field"] for e in refused.json()["errors"]} >= {"name", "contacts.0", "hostnames.0"}
    assert not NamespaceRequest.objects.exists()


def test_a_request_for_an_existing_namespace_is_its_day_two_change(alice, world):
    request = NamespaceRequest.objects.get(pk=alice.post(URL, request_spec(), format="json").json()["id"])
    commit(request)
    bigger = request_spec()
    bigger["quota"]["memory"]["limits"] = "128Gi"
    dry = alice.post(f"{URL}?dry_run=1", bigger, format="json").json()
    assert dry["change_of"] == "a-llm01-mlflow" and dry["valid"]
    assert "-    limits.memory: 64Gi\n+    limits.memory: 128Gi\n" in dry["diff"]
    change = alice.post(URL, bigger, format="json").json()
    assert change["kind"] == "change"
    same = alice.post(f"{URL}?dry_run=1", request_spec(), format="json").json()
    assert same["change_of"] == "a-llm01-mlflow"


@pytest.mark.parametrize("body, content_type, status, words", [
    ("{not json", "application/json", 400, "JSON parse error"),
    ("[1, 2]", "application/json", 400, "a request is an object"),
    ('"text"', "application/json", 400, "a request is an object"),
    ("team=a-llm01", "text/plain", 415, "Unsupported media type"),
])
def test_bad_bodies_get_clear_answers(alice, body, content_type, status, words):
    response = alice.generic("POST", URL, body, content_type=content_type)
    assert response.status_code == status
    assert words in json.dumps(response.json())
    assert not NamespaceRequest.objects.exists()


def test_a_huge_request_is_refused_before_it_is_read(alice):
    spec = request_spec(purpose="x" * 300_000)
    response = alice.post(URL, spec, format="json")
    assert response.status_code == 413
    assert response.json()["detail"].startswith("the request has 300,")
    assert response.json()["detail"].endswith("a namespace request is at most 262,144 bytes of JSON")


def test_hostile_strings_come_back_as_data(alice):
    spec = request_spec(purpose="<script>alert(1)</script>\nkind: ClusterRole\n---\n{{ 7*7 }} ${HOME}")
    body = alice.post(URL, spec, format="json").json()
    assert body["spec"]["purpose"] == spec["purpose"]
    request = NamespaceRequest.objects.get(pk=body["id"])
    commit(request)
    text = repository().read(DIRECTORY)["00-namespace.yaml"]
    assert "belvedere.io/purpose: |-\n      <script>alert(1)</script>\n      kind: ClusterRole\n      ---\n" in text


def test_decisions_through_the_api(world, api_client):
    api_client.force_authenticate(world["alice"])
    prod = request_spec(name="prod", environment="prod", hostnames=[], blueprints=[],
                        quota={"cpu": {"requests": "4"}, "memory": {"requests": "8Gi"}})
    pk = api_client.post(URL, prod, format="json").json()["id"]
    api_client.force_authenticate(world["lena"])
    rejected = api_client.post(f"{URL}{pk}/reject/", {}, format="json")
    assert rejected.status_code == 409 and rejected.json()["detail"] == "say why the request is rejected: the team reads it"
    approved = api_client.post(f"{URL}{pk}/approve/", {"reason": "ok for the paper"}, format="json")
    assert approved.status_code == 200 and approved.json()["status"] == "approved" and approved.json()["decided_by"] == "lena"
    again = api_client.post(f"{URL}{pk}/approve/", {}, format="json")
    assert again.status_code == 409 and "not waiting for approval" in again.json()["detail"]


def test_teardown_through_the_api(alice, world):
    request = NamespaceRequest.objects.get(pk=alice.post(URL, request_spec(), format="json").json()["id"])
    commit(request)
    missing = alice.post("/api/v1/namespaces/a-llm01-mlflow/teardown/", {}, format="json")
    assert missing.status_code == 409 and missing.json()["detail"] == "say why the namespace goes away"
    started = alice.post("/api/v1/namespaces/a-llm01-mlflow/teardown/", {"reason": "done", "backup": True}, format="json")
    assert started.status_code == 202 and started.json()["state"] == "tearing_down"
    early = alice.post("/api/v1/namespaces/a-llm01-mlflow/teardown/backup-done/")
    assert early.status_code == 409  # the freeze has not run yet (the worker does it)
    from apps.namespaces.services import teardown_advance

    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    assert teardown_advance(namespace) == "backup"
    done = alice.post("/api/v1/namespaces/a-llm01-mlflow/teardown/backup-done/")
    assert done.status_code == 200 and done.json()["state"] == "archived"
    assert [e["to"] for e in done.json()["events"]][-4:] == ["prune", "verify", "archive", "archived"]


def test_inventory_shows_what_is_left(alice, world):
    commit(NamespaceRequest.objects.get(pk=alice.post(URL, request_spec(), format="json").json()["id"]))
    body = alice.get("/api/v1/namespaces/inventory/").json()
    h100 = next(m for m in body["gpu_models"] if m["id"] == "h100")
    slices = next(p for p in h100["profiles"] if p["profile"] == "1g.10gb")
    assert slices == {"profile": "1g.10gb", "resource": "nvidia.com/mig-1g.10gb", "capacity": 28, "left": 26}
    assert body["environments"]["prod"] == {"storage": ["ceph-rbd", "cephfs"], "psa": ["restricted", "baseline"], "approval": True}


def test_capacity_taken_by_another_team_is_checked(world, api_client):
    api_client.force_authenticate(world["bob"])
    greedy = copy.deepcopy(request_spec(team="b-moe02", name="serve", hostnames=[], blueprints=[]))
    greedy["quota"]["gpus"] = [{"model": "h100", "profile": "1g.10gb", "count": 27}]
    greedy["contacts"] = ["bob@example.org"]
    pk = api_client.post(URL, greedy, format="json").json()["id"]  # beyond bob's envelope: waits, holds nothing yet
    api_client.force_authenticate(world["sam"])
    assert api_client.post(f"{URL}{pk}/approve/", {}, format="json").status_code == 200  # b-moe02 has no named approvers
    commit(NamespaceRequest.objects.get(pk=pk))
    api_client.force_authenticate(world["alice"])
    body = api_client.post(f"{URL}?dry_run=1", request_spec(), format="json").json()
    assert {p["field"]: p["message"] for p in body["problems"]}["quota.gpus.0.count"] == \
        "2 1g.10gb slices of NVIDIA H100 SXM 80GB asked, 1 left on the cluster"


@pytest.mark.parametrize("query", ["dry_run=maybe", "dry_run=%C2%B2"])
def test_an_unreadable_dry_run_flag_is_a_400_not_a_submission(alice, query):
    """Issue 16 item 6: ?dry_run=maybe was read as "no" and submitted the request for real."""
    response = alice.post(f"{URL}?{query}", request_spec(), format="json")
    assert response.status_code == 400 and [e["field"] for e in response.json()["errors"]] == ["dry_run"]
    assert not NamespaceRequest.objects.exists()
    assert alice.post(f"{URL}?dry_run=true", request_spec(), format="json").json()["valid"] is True


def test_a_garbled_content_length_is_not_a_500(alice):
    response = alice.post(f"{URL}?dry_run=1", request_spec(), format="json", CONTENT_LENGTH="²")
    assert response.status_code < 500
