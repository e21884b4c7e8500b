"""Rules over stored history (idempotence), node health transitions, notifications, rule versions."""
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from apps.vetting.scontrol import SlurmNodeActions
from apps.vetting.node_states import TransitionError
from apps.vetting.models import NodeHealth, NodeHealthEvent, Recommendation, Rule, RuleVersion
from apps.vetting.records import Result, Run
from apps.vetting.services import node_act, recommendation_resolve, rule_save, rules_evaluate, run_store


def gpu_failure(host, days_ago):
    return Run(source="json", started=timezone.now() - timedelta(days=days_ago), results=[
        Result(host=host, eval_name="gpu idle", eval_type="vetnode.evaluations.gpu_eval.GPUEval", kind="vetnode", status="FAILED",
               outcome="fail", local_rank=rank) for rank in range(4)])


@pytest.fixture
def cluster(topology):
    from apps.jobs.models import Cluster

    return Cluster.objects.create(name="alps")


def test_rules_recommend_once_however_often_they_run(cluster):
    for days in (5, 3, 1):
        run_store(gpu_failure("nid000010", days), cluster=cluster)
    first = rules_evaluate()
    assert first["created"] == 1
    recommendation = Recommendation.objects.get()
    assert (recommendation.rule.slug, recommendation.subject, recommendation.action) == ("gpu-failures-7d", "nid000010", "drain_recommended")
    assert len(recommendation.evidence) == 12
    health = NodeHealth.objects.get(host="nid000010")
    assert health.state == "drain_recommended"
    event = NodeHealthEvent.objects.get(host="nid000010")
    assert (event.from_state, event.to_state, event.actor) == ("healthy", "drain_recommended", "rule:gpu-failures-7d v1")
    again = rules_evaluate()
    assert again == {"findings": 1, "created": 0, "updated": 0}
    assert Recommendation.objects.count() == 1 and NodeHealthEvent.objects.count() == 1
    run_store(gpu_failure("nid000010", 0), cluster=cluster)  # more evidence: the open recommendation grows
    assert rules_evaluate()["updated"] == 1 and len(Recommendation.objects.get().evidence) == 16


def test_a_dismissed_recommendation_returns_only_with_new_evidence(cluster):
    for days in (5, 3, 1):
        run_store(gpu_failure("nid000010", days), cluster=cluster)
    rules_evaluate()
    recommendation = Recommendation.objects.get()
    recommendation_resolve(recommendation, actor="ops", dismiss=True)
    assert rules_evaluate()["created"] == 0
    run_store(gpu_failure("nid000010", 0), cluster=cluster)
    assert rules_evaluate()["created"] == 1
    assert list(Recommendation.objects.values_list("status", flat=True).order_by("id")) == ["dismissed", "open"]


def test_staff_actions_follow_the_states_and_record_the_command(cluster, settings):
    settings.VETTING_ACTIONS_DRY_RUN = True
    for days in (5, 3, 1):
        run_store(gpu_failure("nid000010", days), cluster=cluster)
    rules_evaluate()
    with pytest.raises(TransitionError, match="say why"):
        node_act("nid000010", "drain", actor="ops", reason="  ")
    event = node_act("nid000010", "drain", actor="ops", reason="3 GPU failures this week")
    assert event.command == "scontrol update NodeName=nid000010 State=DRAIN 'Reason=Belvedere: 3 GPU failures this week'"
    assert not event.executed and event.dry_run and "dry run" in event.output
    # a dry run changes nothing: the node, its recommendation (issue 16 item 11)
    assert (event.from_state, event.to_state) == ("drain_recommended", "drain_recommended")
    assert NodeHealth.objects.get(host="nid000010").state == "drain_recommended" and Recommendation.objects.get().status == "open"
    ran = []
    backend = SlurmNodeActions(lambda command, timeout: ran.append(command) or "", dry_run=False)
    event = node_act("nid000010", "drain", actor="ops", reason="3 GPU failures this week", backend=backend)
    assert event.executed and not event.dry_run and ran == [["scontrol", "update", "NodeName=nid000010", "State=DRAIN",
                                                             "Reason=Belvedere: 3 GPU failures this week"]]
    health = NodeHealth.objects.get(host="nid000010")
    assert health.state == "drained" and health.drained_by_belvedere
    assert Recommendation.objects.get().status == "done"
    with pytest.raises(TransitionError, match="cannot be cleared"):
        node_act("nid000010", "clear", actor="ops", reason="x")
    node_act("nid000010", "repair", actor="ops", reason="RMA for GPU 2")
    node_act("nid000010", "return", actor="ops", reason="GPU replaced",
             backend=SlurmNodeActions(lambda command, timeout: "NodeName=nid000010 State=IDLE+DRAIN Reason=Belvedere: x"
                                      if command[1] == "show" else "", dry_run=False))
    node_act("nid000010", "clear", actor="ops", reason="vetting passed")
    assert list(NodeHealthEvent.objects.filter(host="nid000010").order_by("id").values_list("to_state", flat=True)) == [
        "drain_recommended", "drain_recommended", "drained", "in_repair", "returned", "healthy"]


class Hook(BaseHTTPRequestHandler):
    received = []

    def do_POST(self):  # noqa: N802 - http.server's name
        Hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_new_recommendations_are_mailed_and_posted_to_the_webhook(cluster, settings):
    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Hook.received = []
    settings.VETTING_WEBHOOK_URL = f"http://127.0.0.1:{server.server_port}/hook"
    settings.VETTING_NOTIFY_EMAILS = ["ops@example.org"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    try:
        run_store(Run(source="health", started=timezone.now(), results=[
            Result(host="nid000020", eval_name="check_gpu_xid", kind="health", status="CRITICAL", outcome="critical",
                   message="Xid 79")]), cluster=cluster)
        rules_evaluate()
    finally:
        server.shutdown()
    [message] = mail.outbox
    assert message.subject == "[Belvedere] exclude now: node nid000020" and "check_gpu_xid was critical" in message.body
    [payload] = Hook.received
    assert payload["subject"] == "nid000020" and payload["action"] == "exclude_now" and payload["severity"] == "critical"
    assert Recommendation.objects.get().notified is True


def test_a_dead_webhook_does_not_lose_the_recommendation(cluster, settings):
    settings.VETTING_WEBHOOK_URL = "http://127.0.0.1:9/nothing-listens"
    run_store(Run(source="health", started=timezone.now(), results=[
        Result(host="nid000021", eval_name="check_gpu_xid", kind="health", status="CRITICAL", outcome="critical")]), cluster=cluster)
    assert rules_evaluate()["created"] == 1
    assert Recommendation.objects.get().notified is False


def test_rules_are_versioned_and_invalid_changes_are_refused_whole(cluster, api_client, make_user):
    rules_evaluate()  # creates the built-in rules
    staff, user = make_user("ops", is_staff=True), make_user("bob")
    api_client.force_authenticate(user)
    assert api_client.patch("/api/v1/vetting/rules/gpu-failures-7d/", {"params": {"min_failures": 2}}, format="json").status_code == 403
    api_client.force_authenticate(staff)
    response = api_client.patch("/api/v1/vetting/rules/gpu-failures-7d/",
                                {"params": {"min_failures": 2, "days": 7, "evals": ["GPUEval"]}, "comment": "too lenient"}, format="json")
    assert response.status_code == 200 and response.json()["version"] == 2
    assert [v["version"] for v in response.json()["versions"]] == [2, 1]
    bad = api_client.patch("/api/v1/vetting/rules/gpu-failures-7d/", {"params": {"min_failures": 0}, "action": "nuke"}, format="json")
    assert bad.status_code == 400 and {e["field"] for e in bad.json()["errors"]} == {"action", "params.min_failures"}
    rule = Rule.objects.get(slug="gpu-failures-7d")
    assert rule.version == 2 and rule.params["min_failures"] == 2 and RuleVersion.objects.filter(rule=rule).count() == 2
    assert rule_save(rule, {"name": rule.name}, user="ops").version == 2  # no change, no version
    for days in (3, 1):
        run_store(gpu_failure("nid000030", days), cluster=cluster)
    rules_evaluate()
    assert Recommendation.objects.get(subject="nid000030").rule_version == 2


@pytest.mark.parametrize("method, url, body, fields", [
    ("post", "/api/v1/vetting/rules/", {"slug": "odd", "name": "Odd", "kind": "no-such-kind", "params": [1, 2],
                                        "action": "suspect", "severity": "warning"}, {"kind", "params"}),
    ("post", "/api/v1/vetting/rules/", {"slug": "odd", "name": "Odd", "kind": "no-such-kind", "params": {"days": 3},
                                        "action": "suspect", "severity": "warning"}, {"kind"}),
    ("post", "/api/v1/vetting/rules/", {"slug": "odd", "name": "Odd", "kind": "critical_result", "params": "days=3",
                                        "action": "suspect", "severity": "warning"}, {"params"}),
    ("patch", "/api/v1/vetting/rules/gpu-failures-7d/", {"kind": "no-such-kind"}, {"kind"}),
    ("patch", "/api/v1/vetting/rules/gpu-failures-7d/", {"params": ["min_failures", 2]}, {"params"}),
    ("patch", "/api/v1/vetting/rules/gpu-failures-7d/", {"params": "min_failures=2"}, {"params"}),
    ("patch", "/api/v1/vetting/rules/gpu-failures-7d/", {"kind": "nope", "params": 7}, {"kind", "params"}),
    ("patch", "/api/v1/vetting/rules/gpu-failures-7d/", {"params": {"days": 1e9}}, {"params.days"}),
])
def test_rules_api_names_the_field_of_a_bad_kind_or_params(cluster, api_client, make_user, method, url, body, fields):
    """Issue 33, finding 3b: an unknown kind with non-object params, non-object params, a window of a billion
    days (later a 500 on every rules evaluation) were 500s; each is a 400 naming the field,
    and the rule is unchanged."""
    rules_evaluate()  # creates the built-in rules
    before = Rule.objects.get(slug="gpu-failures-7d").version
    api_client.force_authenticate(make_user("ops", is_staff=True))
    response = getattr(api_client, method)(url, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert {error["field"] for error in response.json()["errors"]} == fields, response.json()
    assert Rule.objects.get(slug="gpu-failures-7d").version == before and not Rule.objects.filter(slug="odd").exists()
    rules_evaluate()
