"""The namespace status refresher without Argo CD (issue 23): recorded failures and their reasons survive any
number of refreshes, a namespace waiting for its sync resolves to what git knows or times out with a
message, and with Argo CD a sync that never comes times out too. The rules (``status.py``) are tested
directly; the refresher is the real Celery task over the real models, git repository and Argo CD client."""
from datetime import datetime, timedelta, timezone as dt_timezone

import pytest
from django.utils import timezone

from apps.namespaces import status as rules
from apps.namespaces.models import ManagedNamespace, RequestEvent
from apps.namespaces.services import commit, refresh_status, submit
from apps.namespaces.tasks import refresh_statuses_task
from tests.namespaces.conftest import ARGO_TOKEN, argo_body, request_spec

NOW = datetime(2026, 11, 26, 17, 0, tzinfo=dt_timezone.utc)


def known(state, message="", commit="", committed_at=None, created=NOW - timedelta(minutes=5)):
    return rules.Known(state=state, message=message, commit=commit, committed_at=committed_at, created=created)


# ------------------------------------------------------------------ the rules, plain


@pytest.mark.parametrize("state", ["failed", "degraded"])
def test_without_argo_cd_a_failure_and_its_reason_stay(state):
    outcome = rules.without_argo(known(state, "x-vllm-inference: sync failed: exceeded quota", "a" * 40, NOW - timedelta(hours=3)), NOW)
    assert (outcome.state, outcome.message) == (state, "x-vllm-inference: sync failed: exceeded quota")
    assert outcome.remark == "no Argo CD configured: nothing reports whether this was fixed; last commit aaaaaaaaaaaa at 2026-11-26 14:00 UTC"


@pytest.mark.parametrize("state", ["provisioning", "syncing"])
def test_without_argo_cd_a_committed_namespace_resolves_to_what_git_knows(state):
    outcome = rules.without_argo(known(state, "committed, no Argo CD configured", "b" * 40, NOW - timedelta(minutes=2)), NOW)
    assert outcome == rules.Outcome("committed", "committed to git at 2026-11-26 16:58 UTC (bbbbbbbbbbbb); no Argo CD to report sync")


def test_without_argo_cd_nothing_committed_times_out_with_a_message():
    waiting = rules.without_argo(known("provisioning", created=NOW - timedelta(minutes=29)), NOW)
    assert (waiting.state, waiting.message) == ("provisioning", "waiting for the commit to git")
    late = rules.without_argo(known("provisioning", created=NOW - rules.PROVISIONING_TIMEOUT - timedelta(minutes=1)), NOW)
    assert late.state == "failed"
    assert late.message == ("nothing was committed to git 31 minutes after the namespace was created: the commit did not happen "
                            "(see its request's steps)")


def test_an_unreachable_argo_cd_keeps_the_reading_and_says_why_there_is_no_newer_one():
    outcome = rules.argo_unreachable(known("failed", "quota exceeded"), "Argo CD at https://argo is unreachable: refused")
    assert outcome == rules.Outcome("failed", "quota exceeded", "status unknown now: Argo CD at https://argo is unreachable: refused")


def test_with_argo_cd_a_sync_that_never_comes_times_out():
    committed_at = NOW - timedelta(minutes=45)
    outcome = rules.from_argo(known("syncing", commit="c" * 40, committed_at=committed_at), "syncing", "tenant-x: not created by Argo CD yet", NOW)
    assert outcome.state == "failed"
    assert outcome.message == ("timed out: not synced 45 minutes after commit cccccccccccc (committed at 2026-11-26 16:15 UTC); "
                               "Argo CD says: tenant-x: not created by Argo CD yet")
    soon = rules.from_argo(known("syncing", commit="c" * 40, committed_at=NOW - timedelta(minutes=3)), "syncing", "waiting", NOW)
    assert soon == rules.Outcome("syncing", "waiting")
    healed = rules.from_argo(known("failed", commit="c" * 40, committed_at=committed_at), "ready", "2 application(s) synced and healthy", NOW)
    assert healed.state == "ready"  # Argo CD itself says the failure is gone


# ------------------------------------------------------------------ the real refresher, several cycles


def _failed_through_argo(world, settings, argo_server):
    """a-llm01-mlflow, failed as Argo CD reported it (a real-format answer), then Argo CD is taken away."""
    settings.ARGOCD_URL, settings.ARGOCD_TOKEN, settings.ARGOCD_TIMEOUT = argo_server.url, ARGO_TOKEN, 3
    request = submit(request_spec(), world["alice"])
    commit(request)
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    argo_server.apps = {"tenant-a-llm01-mlflow": argo_body("argocd-app-synced-healthy.json", "tenant-a-llm01-mlflow"),
                        "a-llm01-mlflow-mlflow": argo_body("argocd-app-degraded-failed-sync.json", "a-llm01-mlflow-mlflow")}
    refresh_status(namespace)
    assert namespace.state == "failed"
    settings.ARGOCD_URL = ""
    return namespace


def test_the_refresher_without_argo_cd_keeps_failures_and_resolves_the_rest(world, settings, argo_server):
    failed = _failed_through_argo(world, settings, argo_server)
    reason, sync = failed.status_message, (failed.sync_status, failed.health_status)
    assert "a-llm01-mlflow-mlflow: sync failed: one or more objects failed to apply" in reason
    # a new namespace, committed without Argo CD
    fresh = submit(request_spec(name="notes", hostnames=[], blueprints=[], quota={"cpu": {"requests": "2"}, "memory": {"requests": "4Gi"}}),
                   world["mia"])
    commit(fresh)
    fresh_ns = ManagedNamespace.objects.get(name="a-llm01-notes")
    # one whose commit never happened, created long ago (its worker died before writing)
    orphan = ManagedNamespace.objects.create(name="a-llm01-orphan", project=failed.project, environment="dev",
                                             spec=request_spec(name="orphan", hostnames=[], blueprints=[]))
    ManagedNamespace.objects.filter(pk=orphan.pk).update(created=timezone.now() - rules.PROVISIONING_TIMEOUT - timedelta(minutes=5))
    young = ManagedNamespace.objects.create(name="a-llm01-young", project=failed.project, environment="dev",
                                            spec=request_spec(name="young", hostnames=[], blueprints=[]))

    for _ in range(5):  # five beats of NAMESPACES_STATUS_SECONDS
        touched = refresh_statuses_task.apply().get()
        assert set(touched) >= {"a-llm01-mlflow", "a-llm01-notes", "a-llm01-orphan", "a-llm01-young"}

    failed.refresh_from_db()
    assert failed.state == "failed" and failed.status_message == reason  # the reason survives every cycle
    assert (failed.sync_status, failed.health_status) == sync  # the last reading, shown as such on the page
    assert failed.status_detail["remark"].startswith("no Argo CD configured: nothing reports whether this was fixed; last commit ")
    fresh_ns.refresh_from_db()
    assert fresh_ns.state == "committed"
    assert fresh_ns.status_message.endswith(f"({fresh_ns.commit[:12]}); no Argo CD to report sync")
    orphan.refresh_from_db()
    assert orphan.state == "failed" and orphan.status_message.startswith("nothing was committed to git 35 minutes after")
    young.refresh_from_db()
    assert young.state == "provisioning" and young.status_message == "waiting for the commit to git"
    # each change is recorded once, not once per cycle
    assert RequestEvent.objects.filter(namespace=orphan, to_state="failed").count() == 1
    assert RequestEvent.objects.filter(namespace=failed, to_state="failed").count() == 1


def test_the_namespace_page_shows_the_failure_with_the_last_reading(world, settings, argo_server, client):
    failed = _failed_through_argo(world, settings, argo_server)
    refresh_statuses_task.apply().get()
    client.force_login(world["alice"])
    page = client.get(f"/namespaces/{failed.name}/").content.decode()
    assert 'id="ns-state">failed<' in page and "sync failed: one or more objects failed to apply" in page
    assert "not configured" in page and "(last read" in page and "OutOfSync · Degraded)" in page
    assert 'id="ns-remark">no Argo CD configured: nothing reports whether this was fixed' in page
    index = client.get("/namespaces/").content.decode()
    assert "a-llm01-mlflow-mlflow: sync failed" in index


def test_with_argo_cd_a_namespace_never_synced_times_out(world, settings, argo_server):
    settings.ARGOCD_URL, settings.ARGOCD_TOKEN, settings.ARGOCD_TIMEOUT = argo_server.url, ARGO_TOKEN, 3
    request = submit(request_spec(), world["alice"])
    commit(request)
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    refresh_statuses_task.apply().get()  # Argo CD has made no application yet
    namespace.refresh_from_db()
    assert namespace.state == "syncing"
    RequestEvent.objects.filter(commit=namespace.commit).update(created=timezone.now() - rules.PROVISIONING_TIMEOUT - timedelta(minutes=1))
    for _ in range(3):
        refresh_statuses_task.apply().get()
    namespace.refresh_from_db()
    request.refresh_from_db()
    assert namespace.state == "failed" and namespace.status_message.startswith("timed out: not synced 31 minutes after commit ")
    assert "not created by Argo CD yet" in namespace.status_message and request.status == "failed"
    argo_server.apps = {"tenant-a-llm01-mlflow": argo_body("argocd-app-synced-healthy.json", "tenant-a-llm01-mlflow"),
                        "a-llm01-mlflow-mlflow": argo_body("argocd-app-synced-healthy.json", "a-llm01-mlflow-mlflow")}
    refresh_statuses_task.apply().get()
    namespace.refresh_from_db()
    assert namespace.state == "ready"


def test_without_argo_cd_a_syncing_request_follows_its_committed_namespace(world, settings, argo_server):
    settings.ARGOCD_URL, settings.ARGOCD_TOKEN, settings.ARGOCD_TIMEOUT = argo_server.url, ARGO_TOKEN, 3
    request = submit(request_spec(), world["alice"])
    commit(request)
    refresh_statuses_task.apply().get()  # Argo CD has made no application yet: the request syncs
    request.refresh_from_db()
    assert request.status == "syncing"
    settings.ARGOCD_URL = ""  # then Argo CD is taken away
    for _ in range(2):
        refresh_statuses_task.apply().get()
    request.refresh_from_db()
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    assert namespace.state == "committed" and request.status == "committed"
    assert RequestEvent.objects.filter(request=request, to_state="committed").count() >= 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.engine_independent  # what the demo planted; the refresher on each engine is the world tests above
def test_the_demo_keeps_its_failure_through_refreshes_without_argo_cd(settings):
    """The case measured on `make run`: after the 2-minute beat the failed namespace had lost its reason."""
    from tests.demo_snapshot import load_demo

    load_demo()
    settings.ARGOCD_URL = ""
    before = {ns.name: (ns.state, ns.status_message) for ns in ManagedNamespace.objects.exclude(state="archived")}
    assert "failed" in {state for state, _ in before.values()} and "syncing" in {state for state, _ in before.values()}
    for _ in range(3):
        refresh_statuses_task.apply().get()
    for namespace in ManagedNamespace.objects.exclude(state="archived"):
        state, message = before[namespace.name]
        if state in ("failed", "degraded", "ready"):
            assert (namespace.state, namespace.status_message) == (state, message), namespace.name
        else:  # waiting for a sync nobody will report: what git knows
            assert namespace.state == "committed", namespace.name
            assert namespace.status_message.endswith(f"({namespace.commit[:12]}); no Argo CD to report sync"), namespace.name
    failed = ManagedNamespace.objects.get(state="failed")
    assert "exceeded quota: belvedere-quota" in failed.status_message
