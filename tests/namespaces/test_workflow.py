"""The request state machine against a real local git repository: approval paths, idempotent
re-submission, a day-2 change's exact diff, status from Argo CD, and the ordered teardown."""
import re
import socket

import pytest
import yaml

from apps.core.models import TaskRun
from apps.namespaces.models import ManagedNamespace, NamespaceRequest, RequestEvent
from apps.namespaces.services import (
    NotAllowed,
    RequestRefused,
    commit,
    decide,
    refresh_status,
    repository,
    submit,
    teardown_advance,
    teardown_request,
)
from apps.namespaces.tasks import commit_request_task
from tests.namespaces.conftest import ARGO_TOKEN, DIRECTORY, argo_body, request_spec

FILES = ["00-namespace.yaml", "10-resourcequota.yaml", "11-limitrange.yaml", "20-networkpolicy.yaml", "30-rolebinding.yaml",
         "40-appproject.yaml", "50-application-mlflow.yaml", "README.md"]


def steps(obj) -> list[tuple]:
    return [(e.from_state, e.to_state, e.actor) for e in obj.events.all()]


def changes(sha: str) -> dict[str, tuple[list[str], list[str]]]:
    """What a commit changed: file -> (removed lines, added lines), from ``git show``."""
    text = repository()._git("show", "--format=", "--unified=0", sha)
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("+++ ") or line.startswith("--- "):
            path = line[4:]
            if path != "/dev/null":
                current = path.split("/", 1)[1].rsplit("/", 1)[-1]
                out.setdefault(current, ([], []))
        elif line.startswith("-") and current:
            out[current][0].append(line[1:])
        elif line.startswith("+") and current:
            out[current][1].append(line[1:])
    return out


def committed(world, spec=None, user="alice"):
    request = submit(spec or request_spec(), world[user])
    commit(request)
    request.refresh_from_db()
    return request, ManagedNamespace.objects.get(name=request.name)


# ------------------------------------------------------------------ approval paths

def test_inside_the_envelope_it_is_approved_at_once_and_committed(world):
    request = submit(request_spec(), world["alice"])
    assert request.status == "approved" and request.needs_approval == [] and request.approvers == ["lena"]
    result = commit_request_task.apply(args=[request.pk]).get()  # the Celery task, run in this process
    request.refresh_from_db()
    log = repository().log(DIRECTORY)
    assert result == {"request": request.pk, "status": "committed", "commit": log[0].sha}
    assert len(log) == 1 and request.commit == log[0].sha
    assert log[0].message == f"a-llm01-mlflow: new namespace ({request.number} by alice, approved automatically within the team's envelope)"
    assert sorted(repository().read(DIRECTORY)) == FILES
    assert steps(request) == [("", "draft", "alice"), ("draft", "approved", "belvedere"), ("approved", "committed", "belvedere")]
    assert request.events.get(to_state="committed").commit == log[0].sha
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    # no Argo CD: the namespace says what git knows, at once
    assert namespace.state == "committed" and namespace.commit == log[0].sha
    assert re.fullmatch(rf"committed to git at \d{{4}}-\d\d-\d\d \d\d:\d\d UTC \({log[0].sha[:12]}\); no Argo CD to report sync",
                        namespace.status_message), namespace.status_message
    run = TaskRun.objects.get(name="namespaces.commit_request")
    assert run.subject == f"{request.number} a-llm01-mlflow" and run.status == "succeeded"


def test_manifests_that_break_the_schemas_are_never_committed(world, monkeypatch):
    """A renderer fault (here: a field Kubernetes does not know, slipped into the quota) fails the request
    with the schema's words and leaves the repository untouched."""
    from apps.namespaces import services

    real_render = services.render

    def faulty_render(spec, inventory):
        manifests = real_render(spec, inventory)
        quota = next(m for m in manifests if m["kind"] == "ResourceQuota")
        quota["spec"]["hardd"] = {"cpu": "4"}
        return manifests

    from pathlib import Path

    from django.conf import settings

    request = submit(request_spec(), world["alice"])
    monkeypatch.setattr(services, "render", faulty_render)
    commit(request)
    request.refresh_from_db()
    assert request.status == "failed" and request.commit == ""
    assert "ResourceQuota/" in request.message and "hardd" in request.message and "nothing committed" in request.message
    assert not (Path(settings.NAMESPACES_GIT_PATH) / DIRECTORY).exists()
    assert not ManagedNamespace.objects.filter(name=request.name).exists()


def test_beyond_the_envelope_only_the_named_approver_decides(world):
    spec = request_spec(environment="prod", quota={**request_spec()["quota"], "storage": {"ceph-rbd": {"size": "100Gi"}}})
    request = submit(spec, world["alice"])
    assert request.status == "waiting_approval" and request.needs_approval == ["prod namespaces are approved by a person"]
    assert request.message == "needs approval by lena: prod namespaces are approved by a person"
    for who, text in (("alice", "only lena may decide"), ("bob", "only lena may decide"), ("sam", "only lena may decide")):
        with pytest.raises(NotAllowed, match=text):
            decide(request, world[who], approve=True)
    with pytest.raises(NotAllowed, match="say why the request is rejected"):
        decide(request, world["lena"], approve=False, reason="  ")
    assert not (repository().path / ".git").exists()  # nothing was written while it waited
    decide(request, world["lena"], approve=True, reason="prod MLflow for the paper runs")
    commit(request)
    request.refresh_from_db()
    assert request.status == "committed" and request.decided_by == world["lena"]
    assert repository().log(DIRECTORY)[0].message.endswith("approved by lena)")
    assert [to for _, to, _ in steps(request)] == ["draft", "waiting_approval", "approved", "committed"]
    assert steps(request)[2] == ("waiting_approval", "approved", "lena")
    with pytest.raises(NotAllowed, match="is committed, not waiting for approval"):
        decide(request, world["lena"], approve=False, reason="changed my mind")


def test_a_rejected_request_writes_nothing_and_frees_its_name(world):
    spec = request_spec(psa="baseline", psa_justification="the chart's init container runs as root")
    request = submit(spec, world["alice"])
    assert request.status == "waiting_approval"
    with pytest.raises(RequestRefused, match="name: 'a-llm01-mlflow' already exists"):
        submit(request_spec(), world["mia"])  # a waiting request holds its name
    decide(request, world["lena"], approve=False, reason="use the restricted chart variant")
    commit(request)  # a task that arrives late changes nothing
    request.refresh_from_db()
    assert request.status == "rejected" and request.decision_reason == "use the restricted chart variant"
    assert not ManagedNamespace.objects.exists() and not (repository().path / ".git").exists()
    assert submit(request_spec(), world["mia"]).status == "approved"


def test_a_refused_request_stores_nothing(world):
    before = (NamespaceRequest.objects.count(), RequestEvent.objects.count())
    with pytest.raises(RequestRefused) as refused:
        submit(request_spec(psa="privileged"), world["alice"])
    assert [p.field for p in refused.value.check.problems] == ["psa"]
    with pytest.raises(RequestRefused, match="team: you are not a member of a-llm01"):
        submit(request_spec(), world["bob"])
    assert (NamespaceRequest.objects.count(), RequestEvent.objects.count()) == before


def test_the_team_namespace_count_is_part_of_the_envelope(world):
    from apps.namespaces.models import TeamEnvelope

    TeamEnvelope.objects.filter(project__slurm_account="a-llm01").update(namespaces=1)
    committed(world)
    second = submit(request_spec(name="chat", hostnames=["a-llm01-chat.svc.alps.example.org"],
                                 blueprints=[{"id": "mlflow", "params": {"hostname": "a-llm01-chat.svc.alps.example.org"}}]), world["mia"])
    assert second.needs_approval == ["the team already has 1 namespaces, its envelope allows 1"]


# ------------------------------------------------------------------ idempotence and day 2

def test_resubmitting_the_same_request_makes_no_commit(world):
    first, namespace = committed(world)
    head, count = repository().head(), len(repository().log(DIRECTORY))
    form_spelling = request_spec()
    form_spelling["quota"]["memory"] = {"requests": "32768Mi", "limits": "64Gi"}  # the same amount, spelt differently
    form_spelling["quota"]["gpus"][0]["count"] = "2"
    again = submit(form_spelling, world["mia"], namespace=namespace)
    assert again.kind == "change" and again.status == "approved"
    commit(again)
    again.refresh_from_db()
    assert again.status == "unchanged" and again.commit == "" and again.diff == ""
    assert repository().head() == head and len(repository().log(DIRECTORY)) == count
    commit(first)  # the same task delivered twice
    assert repository().head() == head


def test_a_day_two_change_commits_exactly_its_diff(world):
    first, namespace = committed(world)
    spec = request_spec()
    spec["quota"]["cpu"]["limits"] = "32"
    spec["quota"]["gpus"].append({"model": "h100", "profile": "whole", "count": 1})
    spec["blueprints"].append({"id": "ray", "params": {"workers": 1, "gpus_per_worker": 1}})
    change = submit(spec, world["alice"], namespace=namespace)
    commit(change)
    change.refresh_from_db()
    assert change.status == "committed" and change.commit != first.commit
    diff = changes(change.commit)
    assert sorted(diff) == ["10-resourcequota.yaml", "40-appproject.yaml", "50-application-ray.yaml", "README.md"]
    assert diff["10-resourcequota.yaml"] == (["    limits.cpu: '16'", "    requests.nvidia.com/gpu: '0'"],
                                             ["    limits.cpu: '32'", "    requests.nvidia.com/gpu: '1'"])
    assert diff["40-appproject.yaml"] == ([], ["  - https://ray-project.github.io/kuberay-helm"])
    removed, added = diff["50-application-ray.yaml"]
    ray = yaml.safe_load("\n".join(added))
    assert removed == [] and ray["metadata"]["name"] == "a-llm01-mlflow-ray" and ray["spec"]["source"]["targetRevision"] == "1.2.2"
    assert diff["README.md"] == (["        limits: '16'"],
                                 ["        limits: '32'", "      - model: h100", "        profile: whole", "        count: 1",
                                  "    - id: ray", "      params:", "        workers: 1", "        gpus_per_worker: 1"])
    assert "+    limits.cpu: '32'" in change.diff  # the request shows the diff it committed
    assert repository().log(DIRECTORY)[0].message == f"a-llm01-mlflow: change ({change.number} by alice, approved automatically within the team's envelope)"
    namespace.refresh_from_db()
    assert namespace.spec["quota"]["cpu"]["limits"] == "32" and namespace.commit == change.commit


def test_a_change_cannot_rename_or_steal(world):
    _, namespace = committed(world)
    with pytest.raises(RequestRefused, match="team: you are not a member of a-llm01"):
        submit(request_spec(), world["bob"], namespace=namespace)


# ------------------------------------------------------------------ Argo CD status

@pytest.fixture
def argo(world, settings, argo_server):
    settings.ARGOCD_URL, settings.ARGOCD_TOKEN, settings.ARGOCD_TIMEOUT = argo_server.url, ARGO_TOKEN, 3
    return argo_server


def test_status_moves_with_argo_cd(world, argo):
    request, namespace = committed(world)
    assert (request.status, namespace.state) == ("syncing", "syncing")
    argo.apps = {"tenant-a-llm01-mlflow": argo_body("argocd-app-outofsync-progressing.json", "tenant-a-llm01-mlflow"),
                 "a-llm01-mlflow-mlflow": argo_body("argocd-app-synced-healthy.json", "a-llm01-mlflow-mlflow")}
    refresh_status(namespace)
    assert namespace.state == "syncing" and namespace.sync_status == "OutOfSync" and namespace.health_status == "Progressing"
    assert namespace.status_message.startswith("tenant-a-llm01-mlflow: OutOfSync, Progressing (waiting for healthy state")
    asked = {(path, query["project"][0]) for path, query, _ in argo.seen}
    assert asked == {("/api/v1/applications/tenant-a-llm01-mlflow", "tenants"), ("/api/v1/applications/a-llm01-mlflow-mlflow", "a-llm01-mlflow")}
    argo.apps["tenant-a-llm01-mlflow"] = argo_body("argocd-app-synced-healthy.json", "tenant-a-llm01-mlflow")
    refresh_status(namespace)
    request.refresh_from_db()
    assert namespace.state == "ready" and request.status == "ready"
    assert namespace.status_message == "2 application(s) synced and healthy"
    argo.apps["a-llm01-mlflow-mlflow"] = argo_body("argocd-app-degraded-failed-sync.json", "a-llm01-mlflow-mlflow")
    refresh_status(namespace)
    assert namespace.state == "failed" and "a-llm01-mlflow-mlflow: sync failed: one or more objects failed to apply" in namespace.status_message
    assert (namespace.sync_status, namespace.health_status) == ("OutOfSync", "Degraded")  # the worst application, not the tenant's
    assert [to for _, to, _ in steps(namespace)] == ["provisioning", "syncing", "ready", "failed"]


def test_unreachable_argo_cd_is_said_and_changes_no_state(world, settings):
    request, namespace = committed(world)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.ARGOCD_URL, settings.ARGOCD_TOKEN, settings.ARGOCD_TIMEOUT = f"http://127.0.0.1:{port}", ARGO_TOKEN, 2
    state, message = namespace.state, namespace.status_message
    refresh_status(namespace)
    namespace.refresh_from_db()
    assert namespace.state == state and namespace.status_checked is not None
    assert namespace.status_message == message  # the last reading stays; why there is no newer one is said beside it
    assert namespace.status_detail["remark"].startswith(f"status unknown now: Argo CD at http://127.0.0.1:{port} is unreachable")


def test_without_argo_cd_the_status_says_what_git_knows(world):
    _, namespace = committed(world)
    refresh_status(namespace)
    assert namespace.state == "committed"
    assert namespace.status_message.startswith("committed to git at ") and namespace.status_message.endswith(
        f"({namespace.commit[:12]}); no Argo CD to report sync")


# ------------------------------------------------------------------ teardown

def test_teardown_runs_in_order_and_waits_for_the_backup(world):
    _, namespace = committed(world)
    request = teardown_request(namespace, world["mia"], backup=True, reason="the project ended", confirm="a-llm01-mlflow")
    assert request.kind == "teardown" and namespace.state == "tearing_down"
    assert teardown_advance(namespace) == "backup"
    freeze = repository().log(DIRECTORY)[0]
    assert freeze.message == "a-llm01-mlflow: freeze before teardown (no new pods)"
    frozen = repository().read(DIRECTORY)
    assert "    pods: '0'" in frozen["10-resourcequota.yaml"] and "    belvedere.io/frozen: 'true'" in frozen["00-namespace.yaml"]
    assert teardown_advance(namespace) == "backup"  # asking again does not skip the backup
    assert teardown_advance(namespace, actor="mia", backup_done=True) == ""
    assert repository().read(DIRECTORY) == {} and not (repository().path / DIRECTORY).exists()
    log = repository().log(DIRECTORY)
    assert [c.message for c in log[:2]] == [f"a-llm01-mlflow: remove (teardown {request.number})", freeze.message]
    namespace.refresh_from_db()
    assert namespace.state == "archived" and namespace.archived is not None
    teardown = [(to, actor, message) for _, to, actor, message in
                ((e.from_state, e.to_state, e.actor, e.message) for e in namespace.events.all()) if to not in ("provisioning", "committed")]
    assert [to for to, _, _ in teardown] == ["tearing_down", "freeze", "backup", "remove", "prune", "verify", "archive", "archived"]
    assert teardown[2] == ("backup", "mia", "volumes backed up (confirmed)")
    assert teardown[4][2] == "not verifiable: no Argo CD configured"
    assert namespace.events.get(to_state="remove").commit == log[0].sha
    request.refresh_from_db()
    assert request.status == "ready" and request.message == "torn down and archived"
    assert teardown_advance(namespace) == ""  # nothing runs twice
    assert len(repository().log(DIRECTORY)) == len(log)


def test_teardown_waits_for_argo_cd_to_prune(world, argo):
    _, namespace = committed(world)
    argo.apps = {"tenant-a-llm01-mlflow": argo_body("argocd-app-synced-healthy.json", "tenant-a-llm01-mlflow"),
                 "a-llm01-mlflow-mlflow": argo_body("argocd-app-synced-healthy.json", "a-llm01-mlflow-mlflow")}
    teardown_request(namespace, world["alice"], backup=False, reason="moved to the new cluster", confirm=namespace.name)
    assert teardown_advance(namespace) == "prune"
    assert namespace.status_message == "waiting for Argo CD to prune tenant-a-llm01-mlflow, a-llm01-mlflow-mlflow"
    assert repository().read(DIRECTORY) == {}  # already removed from git: that is what makes Argo CD prune
    del argo.apps["a-llm01-mlflow-mlflow"]
    assert teardown_advance(namespace) == "prune"
    assert namespace.status_message == "waiting for Argo CD to prune tenant-a-llm01-mlflow"
    argo.apps.clear()
    assert teardown_advance(namespace) == ""
    assert [e.to_state for e in namespace.events.all()][-5:] == ["remove", "prune", "verify", "archive", "archived"]


def test_a_namespace_being_torn_down_cannot_be_torn_down_again(world):
    _, namespace = committed(world)
    with pytest.raises(NotAllowed, match="say why"):
        teardown_request(namespace, world["alice"], backup=False, reason="", confirm=namespace.name)
    teardown_request(namespace, world["alice"], backup=False, reason="done", confirm=namespace.name)
    with pytest.raises(NotAllowed, match="is already tearing down"):
        teardown_request(namespace, world["alice"], backup=False, reason="again", confirm=namespace.name)
