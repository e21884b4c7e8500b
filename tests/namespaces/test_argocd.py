"""Argo CD status, read from real-format API answers (``data/argocd/``: the Application and error bodies of
``GET /api/v1/applications/{name}``; field names and values documented in ``data/argocd/argocd-api.md``)
served over HTTP by a local server, and a clear state when Argo CD cannot be asked."""
import socket

import pytest

from apps.namespaces.argocd import ArgoClient, ArgoUnavailable, parse_application, summarise
from tests.namespaces.conftest import ARGO_TOKEN as TOKEN
from tests.namespaces.conftest import argo_body as body


def test_parse_a_synced_healthy_application():
    app = parse_application(body("argocd-app-synced-healthy.json"))
    assert (app.name, app.sync, app.health, app.operation) == ("team-a-web", "Synced", "Healthy", "Succeeded")
    assert app.revision == "9c2f41d7a0b6e3f85c1d2e4a7b9f0c3d5e6a8b1c"
    assert app.operation_message == "successfully synced (all tasks run)"
    assert app.operation_finished == "2025-05-14T09:12:05Z" and app.reconciled_at == "2025-05-14T09:40:12Z"
    assert app.conditions == [] and app.unhealthy == []
    summary = summarise([app])
    assert summary.state == "ready" and summary.message == "1 application(s) synced and healthy"


def test_parse_a_progressing_application():
    app = parse_application(body("argocd-app-outofsync-progressing.json"))
    assert (app.sync, app.health, app.operation) == ("OutOfSync", "Progressing", "Running")
    assert app.unhealthy == [{"kind": "Deployment", "name": "web", "health": "Progressing",
                              "message": "Waiting for rollout to finish: 1 out of 3 new replicas have been updated..."}]
    summary = summarise([app])
    assert summary.state == "syncing"
    assert summary.message == ("team-a-web: OutOfSync, Progressing (waiting for healthy state of apps/Deployment/web) — Deployment/web "
                               "Progressing: Waiting for rollout to finish: 1 out of 3 new replicas have been updated...")


def test_parse_a_failed_sync_of_a_degraded_application():
    app = parse_application(body("argocd-app-degraded-failed-sync.json"))
    assert (app.sync, app.health, app.operation) == ("OutOfSync", "Degraded", "Failed")
    assert app.conditions[0]["type"] == "SyncError" and "must be less than or equal to cpu limit of 1" in app.conditions[0]["message"]
    assert app.unhealthy[0] == {"kind": "Deployment", "name": "web", "health": "Degraded",
                                "message": 'Deployment "web" exceeded its progress deadline'}
    summary = summarise([parse_application(body("argocd-app-synced-healthy.json")), app])
    assert summary.state == "failed"
    assert summary.message.startswith("team-a-web: sync failed: one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid")
    assert [a["name"] for a in summary.apps] == ["team-a-web", "team-a-web"]


def test_degraded_without_a_failed_operation_is_degraded_not_failed():
    doc = body("argocd-app-degraded-failed-sync.json")
    doc["status"]["operationState"]["phase"] = "Succeeded"
    doc["status"]["conditions"] = []
    summary = summarise([parse_application(doc)])
    assert summary.state == "degraded"
    assert summary.message == "team-a-web: degraded — Deployment/web Degraded: Deployment \"web\" exceeded its progress deadline"


@pytest.mark.parametrize("doc", [{}, {"status": None}, {"status": {"sync": None, "health": "odd", "conditions": ["x", None]}},
                                 {"metadata": {"name": "n"}, "status": {"resources": [None, {"health": None}]}}])
def test_partial_answers_stay_unknown(doc):
    app = parse_application(doc, "fallback")
    assert app.sync == "Unknown" and app.conditions == [] and app.unhealthy == []
    assert summarise([app]).state == "syncing"


@pytest.fixture()
def argocd(argo_server):
    argo_server.apps = {"team-a-web": body("argocd-app-synced-healthy.json"), "team-a-rollout": body("argocd-app-outofsync-progressing.json"),
                        "team-a-broken": body("argocd-app-degraded-failed-sync.json"), "garbage": b"<html>proxy error</html>"}
    return argo_server


def test_the_client_asks_with_the_token_and_the_project(argocd):
    client = ArgoClient(argocd.url, TOKEN)
    app = client.application("team-a-web", "team-a")
    assert app.sync == "Synced" and not app.missing
    path, query, auth = argocd.seen[-1]
    assert path == "/api/v1/applications/team-a-web" and query == {"project": ["team-a"]} and auth == f"Bearer {TOKEN}"
    assert client.application("team-a-broken", "team-a").operation == "Failed"


def test_a_missing_application_is_missing_when_the_project_is_named(argocd):
    app = ArgoClient(argocd.url, TOKEN).application("team-a-gone", "team-a")
    assert app.missing and app.name == "team-a-gone"
    assert summarise([app]).message == "team-a-gone: not created by Argo CD yet"


def test_permission_denied_and_bad_tokens_say_what_to_do(argocd):
    client = ArgoClient(argocd.url, TOKEN)
    with pytest.raises(ArgoUnavailable, match="refused: permission denied .*give the token a role"):
        client._get("/api/v1/applications/team-a-gone")  # without the project Argo CD hides a missing app behind 403
    with pytest.raises(ArgoUnavailable, match=r"does not accept the token \(ARGOCD_TOKEN\): invalid session"):
        ArgoClient(argocd.url, "wrong").application("team-a-web", "team-a")
    with pytest.raises(ArgoUnavailable, match="unreachable"):
        client.application("garbage", "team-a")  # not JSON: a proxy's error page


def test_unreachable_argocd_is_a_clear_state():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ArgoUnavailable, match=rf"Argo CD at http://127.0.0.1:{port} is unreachable: .*refused"):
        ArgoClient(f"http://127.0.0.1:{port}", TOKEN, timeout=2).application("team-a-web", "team-a")
    with pytest.raises(ArgoUnavailable, match="unreachable"):
        ArgoClient("http://argocd.invalid", TOKEN, timeout=2).application("team-a-web", "team-a")
