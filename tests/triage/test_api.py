"""The triage API and pages: staff only, filters, the PATCH of a state with its validation, the plain-form
fallback, and the section on the staff page."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.triage.models import TriageItem
from apps.triage.services import triage_sync


@pytest.fixture
def synced(sources, api_client):
    triage_sync()
    api_client.force_authenticate(sources["staff"])
    return sources


def test_list_is_ranked_and_filtered(synced, api_client):
    body = api_client.get("/api/v1/staff/triage/").json()
    assert [item["key"] for item in body["results"][:2]] == ["wasteful_job:alps/1001", "wasteful_job:alps/1002"]
    assert body["counts"]["open"] == 7 and body["counts"]["by_kind"]["failing_node"]["new"] == 1
    assert body["counts"]["gpu_hours_lost_open"] == pytest.approx(64.0 + 0.4, abs=0.1)
    assert body["results"][0]["job"] == "alps/1001" and body["results"][0]["owner"] == "alice (a-llm01)"
    nodes = api_client.get("/api/v1/staff/triage/?kind=failing_node").json()["results"]
    assert [item["key"] for item in nodes] == ["failing_node:nid000777"]
    assert api_client.get("/api/v1/staff/triage/?state=resolved").json()["results"] == []
    bad = api_client.get("/api/v1/staff/triage/?kind=everything")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "kind"


def test_patch_moves_the_state(synced, api_client):
    item = TriageItem.objects.get(kind="bad_switch")
    url = f"/api/v1/staff/triage/{item.pk}/"
    answer = api_client.patch(url, {"state": "acknowledged", "assignee": "tina"}, format="json")
    assert answer.status_code == 200 and (answer.json()["state"], answer.json()["assignee"]) == ("acknowledged", "tina")
    until = (timezone.now() + timedelta(hours=4)).isoformat()
    answer = api_client.patch(url, {"state": "muted", "muted_until": until}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "muted"
    assert TriageItem.objects.get(pk=item.pk).muted_until is not None
    answer = api_client.patch(url, {"state": "resolved"}, format="json")
    assert answer.json()["state"] == "resolved" and answer.json()["resolved_at"]
    assert api_client.patch(url, {"state": "new"}, format="json").json()["state"] == "new"


@pytest.mark.parametrize("body, field", [
    ({"state": "closed"}, "state"),
    ({}, "state"),
    ({"state": "muted"}, "muted_until"),
    ({"state": "muted", "muted_until": "2020-01-01T00:00:00Z"}, "muted_until"),
    ({"state": "muted", "muted_until": "tomorrow"}, "muted_until"),
    ({"state": "resolved", "muted_until": "2999-01-01T00:00:00Z"}, "muted_until"),
    ({"state": "acknowledged", "assignee": "nobody-here"}, "assignee"),
    ({"state": "acknowledged", "assignee": "alice"}, "assignee"),  # not staff
    ({"state": "resolved", "assignee": "tina"}, "assignee"),
])
def test_bad_changes_are_400_naming_the_field(synced, api_client, body, field):
    item = TriageItem.objects.get(kind="bad_switch")
    answer = api_client.patch(f"/api/v1/staff/triage/{item.pk}/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in [error["field"] for error in answer.json()["errors"]]
    assert TriageItem.objects.get(pk=item.pk).state == "new"


def test_non_staff_are_refused_the_same_for_an_item_and_a_missing_one(synced, api_client):
    item = TriageItem.objects.first()
    api_client.force_authenticate(synced["alice"])
    assert api_client.get("/api/v1/staff/triage/").status_code == 403
    mine = api_client.patch(f"/api/v1/staff/triage/{item.pk}/", {"state": "resolved"}, format="json")
    missing = api_client.patch(f"/api/v1/staff/triage/{item.pk + 1000}/", {"state": "resolved"}, format="json")
    assert mine.status_code == missing.status_code == 403
    assert TriageItem.objects.get(pk=item.pk).state == "new"


def test_the_staff_page_opens_with_the_inbox(synced, client):
    client.force_login(synced["staff"])
    page = client.get("/staff/").content.decode()
    assert page.index('id="triage-heading"') < page.index('id="tasks-heading"')
    assert "Needs a person: 7 items" in re.sub(r"<[^>]+>", "", page)  # the count sits in a span the script updates
    first = page.index("triage-item-")
    assert page.index("alps/1001", first) < page.index("alps/1002", first) < page.index("nid000777", first)
    assert "mailto:alice%40example.org?subject=" in page or "mailto:alice@example.org?subject=" in page
    assert "/api/v1/vetting/nodes/nid000777/actions/" in page  # the dry-run drain
    assert f"/namespaces/requests/{synced['request'].pk}/" in page
    client.force_login(synced["alice"])
    assert client.get("/staff/triage/").status_code == 403


def test_inbox_page_filters_and_the_form_fallback(synced, client):
    client.force_login(synced["staff"])
    page = client.get("/staff/triage/?kind=catalog_incident").content.decode()
    assert "slurm-jobs: freshness target breached" in page and "alps/1001 data-prep-1" not in page
    item = TriageItem.objects.get(kind="catalog_incident")
    answer = client.post(f"/staff/triage/{item.pk}/", {"state": "acknowledged", "next": "/staff/"})
    assert answer.status_code == 302 and answer["Location"] == "/staff/"
    item.refresh_from_db()
    assert (item.state, item.assignee.username) == ("acknowledged", "sam")
    answer = client.post(f"/staff/triage/{item.pk}/", {"state": "muted", "muted_until": "2001-01-01T00:00"}, follow=True)
    assert "the mute must end in the future" in answer.content.decode()
    assert TriageItem.objects.get(pk=item.pk).state == "acknowledged"
    answer = client.post(f"/staff/triage/{item.pk}/", {"state": "resolved", "next": "https://evil.example/"})
    assert answer["Location"] == "/staff/triage/"
    assert TriageItem.objects.get(pk=item.pk).state == "resolved"


def test_query_counts_do_not_grow_with_the_inbox(synced, client):
    """The staff page's section, the inbox page and the API read a fixed number of queries (numbers for
    tests/security/query_counts.toml)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.triage.models import TriageItem

    client.force_login(synced["staff"])
    item = TriageItem.objects.get(kind="wasteful_job", job=synced["idle"])
    paths = ["/staff/", "/staff/triage/", "/staff/triage/?state=all", "/api/v1/staff/triage/", f"/api/v1/staff/triage/{item.pk}/"]

    def counts():
        found = {}
        for path in paths:
            with CaptureQueriesContext(connection) as queries:
                assert client.get(path).status_code == 200
            found[path] = len(queries)
        return found

    small = counts()
    now = timezone.now()
    for n in range(12):
        for kind in ("wasteful_job", "straggler", "failing_node", "catalog_incident"):
            TriageItem.objects.create(key=f"{kind}:extra-{n}", kind=kind, title=f"extra {n}", owner="x", job=synced["busy"],
                                      gpu_hours_lost=1.0 if kind == "wasteful_job" else None, first_seen=now, last_seen=now,
                                      assignee=synced["staff"], state="acknowledged" if n % 2 else "new",
                                      data={"host": f"nid{n:06d}", "drain": True, "job": "alps/1003", "gpus": 4})
    large = counts()
    assert large == small, (small, large)
    print("query counts", small)


def test_refresh_now_queues_the_sync(synced, client, django_capture_on_commit_callbacks):
    """The button publishes triage.sync_inbox to the broker, whichever broker (Celery's before_task_publish
    signal fires as the message goes out; the session's worker may take it at once)."""
    from celery.signals import before_task_publish

    from apps.triage.tasks import sync_inbox_task

    assert sync_inbox_task.name == "triage.sync_inbox" and sync_inbox_task.acks_late
    published = []

    def record(sender=None, **kwargs):
        published.append(sender)

    before_task_publish.connect(record)
    try:
        client.force_login(synced["staff"])
        with django_capture_on_commit_callbacks(execute=True):
            answer = client.post("/staff/triage/refresh/", HTTP_ACCEPT="application/json")
        assert answer.status_code == 200 and answer.json()["queued"] is True
        assert published == ["triage.sync_inbox"]
        client.force_login(synced["alice"])
        assert client.post("/staff/triage/refresh/").status_code == 403
        assert published == ["triage.sync_inbox"]
    finally:
        before_task_publish.disconnect(record)


def test_the_form_mutes_until_a_utc_time_whatever_the_sites_zone(synced, client, settings):
    """The mute field is labelled UTC and the script sends it as UTC; the form used to read it in TIME_ZONE."""
    from datetime import datetime, timezone

    settings.TIME_ZONE = "Europe/Zurich"  # UTC+1 in January
    client.force_login(synced["staff"])
    item = TriageItem.objects.get(kind="catalog_incident")
    client.post(f"/staff/triage/{item.pk}/", {"state": "muted", "muted_until": "2099-01-01T08:00"})
    item.refresh_from_db()
    assert (item.state, item.muted_until) == ("muted", datetime(2099, 1, 1, 8, 0, tzinfo=timezone.utc))
    page = client.get("/staff/triage/?state=muted").content.decode()
    assert "until 01-01 08:00 UTC" in page
