"""Incidents across products (issue 23): one list of every product's incidents; staff acknowledge, assign and
resolve them through the API and the page; people subscribe to a product's incidents and get one mail per new
incident (Django's locmem backend); the staff page's "what waits" counts the open ones nobody acknowledged."""
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.catalog.models import CheckRun, DataProduct, Incident
from apps.catalog.services import _incident, load_catalog


@pytest.fixture
def world(db, make_user):
    load_catalog()
    now = timezone.now()
    device, counters = DataProduct.objects.get(name="dcgm-device"), DataProduct.objects.get(name="gpu-error-counters")
    staff, other_staff = make_user("sam", is_staff=True), make_user("kim", is_staff=True)
    staff.email, other_staff.email = "sam@example.org", "kim@example.org"
    staff.save(), other_staff.save()
    user = make_user("mia", accounts=["a-llm01"])
    user.email = "mia@example.org"
    user.save()
    first = Incident.objects.create(product=device, kind="coverage", opened=now - timedelta(minutes=30), message="16 nodes silent")
    second = Incident.objects.create(product=counters, kind="freshness", opened=now - timedelta(hours=2), message="no sample for 2 days")
    closed = Incident.objects.create(product=device, kind="gaps", opened=now - timedelta(days=1), closed=now - timedelta(hours=20),
                                     message="a closed gap")
    return {"staff": staff, "kim": other_staff, "user": user, "device": device, "counters": counters,
            "first": first, "second": second, "closed": closed}


def test_everyone_lists_every_products_incidents_and_filters_them(world, api_client):
    api_client.force_authenticate(world["user"])
    listed = api_client.get("/api/v1/catalog/incidents/").json()
    assert [(i["product"], i["kind"], i["state"]) for i in listed] == [("dcgm-device", "coverage", "open"),
                                                                         ("gpu-error-counters", "freshness", "open")]
    assert [i["kind"] for i in api_client.get("/api/v1/catalog/incidents/", {"state": "all"}).json()] == ["coverage", "freshness", "gaps"]
    assert [i["kind"] for i in api_client.get("/api/v1/catalog/incidents/", {"state": "resolved"}).json()] == ["gaps"]
    assert [i["kind"] for i in api_client.get("/api/v1/catalog/incidents/", {"product": "gpu-error-counters"}).json()] == ["freshness"]
    bad = api_client.get("/api/v1/catalog/incidents/", {"state": "sleeping"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "state"
    api_client.force_authenticate(None)
    assert api_client.get("/api/v1/catalog/incidents/").status_code == 401


def test_staff_acknowledge_assign_and_resolve_others_may_not(world, api_client):
    url = f"/api/v1/catalog/incidents/{world['first'].pk}/"
    api_client.force_authenticate(world["user"])
    assert api_client.patch(url, {"state": "acknowledged"}, format="json").status_code == 403
    assert Incident.objects.get(pk=world["first"].pk).acknowledged is None
    api_client.force_authenticate(world["staff"])
    body = api_client.patch(url, {"state": "acknowledged"}, format="json").json()
    assert (body["state"], body["acknowledged_by"], body["assignee"]) == ("acknowledged", "sam", None)
    body = api_client.patch(url, {"assignee": "kim"}, format="json").json()
    assert (body["state"], body["assignee"]) == ("acknowledged", "kim")
    # Bad values: a clear 400 naming the field.
    for change, field, words in (({"assignee": "mia"}, "assignee", "no active staff member is named 'mia'"),
                                 ({"assignee": "nobody-at-all"}, "assignee", "no active staff member"),
                                 ({"state": "snoozed"}, "state", "state is one of open, acknowledged, resolved"),
                                 ({}, "state", "give state or assignee")):
        response = api_client.patch(url, change, format="json")
        assert response.status_code == 400, change
        error = response.json()["errors"][0]
        assert error["field"] == field and words in error["message"], (change, error)
    body = api_client.patch(url, {"state": "resolved"}, format="json").json()
    assert (body["state"], body["resolved_by"]) == ("resolved", "sam") and body["closed"]
    again = api_client.patch(url, {"state": "acknowledged"}, format="json")
    assert again.status_code == 400 and "resolved" in again.json()["errors"][0]["message"]
    # Assigning an open incident acknowledges it; unassigning leaves it acknowledged.
    second = f"/api/v1/catalog/incidents/{world['second'].pk}/"
    assert api_client.patch(second, {"assignee": "sam"}, format="json").json()["state"] == "acknowledged"
    assert api_client.patch(second, {"assignee": None}, format="json").json()["assignee"] is None
    assert api_client.patch(second, {"state": "open"}, format="json").json()["state"] == "open"
    assert api_client.patch("/api/v1/catalog/incidents/999999/", {"state": "resolved"}, format="json").status_code == 404


def test_the_waiting_count_is_the_open_incidents_nobody_acknowledged(world):
    from apps.core.waiting import waiting_entries

    entry = next(entry for entry in waiting_entries() if entry.key == "incidents")
    assert (entry.url_name, entry.url_query, entry.order) == ("catalog:incidents", "?state=open", 30)
    assert entry.count(None) == 2
    Incident.objects.filter(pk=world["first"].pk).update(acknowledged=timezone.now())
    assert entry.count(None) == 1


def test_the_incidents_page_lists_all_products_and_gives_staff_the_actions(world, client):
    client.force_login(world["user"])
    page = client.get("/catalog/incidents/").content.decode()
    assert "2 open incidents nobody acknowledged yet" in page
    assert 'href="/catalog/dcgm-device/"' in page and 'href="/catalog/gpu-error-counters/"' in page
    assert 'data-action="resolved"' not in page  # not staff: no actions
    assert "a closed gap" not in page
    assert "a closed gap" in client.get("/catalog/incidents/", {"state": "all"}).content.decode()
    open_only = client.get("/catalog/incidents/", {"state": "open", "product": "gpu-error-counters"}).content.decode()
    assert "no sample for 2 days" in open_only and "16 nodes silent" not in open_only
    client.force_login(world["staff"])
    page = client.get("/catalog/incidents/", {"state": "sleeping"}).content.decode()  # a bad filter falls back to the default
    assert page.count('data-action="resolved"') == 2 and '<option value="kim">kim</option>' in page


def test_subscribers_get_one_mail_per_new_incident(world, api_client, django_capture_on_commit_callbacks):
    api_client.force_authenticate(world["user"])
    assert api_client.post("/api/v1/catalog/subscriptions/", {"product": "dcgm-device", "subscribed": True}, format="json").json() == {
        "products": ["dcgm-device"], "email": "mia@example.org"}
    bad = api_client.post("/api/v1/catalog/subscriptions/", {"product": "no-such", "subscribed": True}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "product"
    empty = api_client.post("/api/v1/catalog/subscriptions/", {}, format="json")
    assert empty.status_code == 400 and {e["field"] for e in empty.json()["errors"]} == {"product", "subscribed"}
    api_client.force_authenticate(world["kim"])
    api_client.post("/api/v1/catalog/subscriptions/", {"product": "gpu-error-counters", "subscribed": True}, format="json")
    device = world["device"]
    Incident.objects.filter(product=device).update(closed=timezone.now())
    mail.outbox.clear()

    def check(status: str) -> CheckRun:
        run = CheckRun.objects.create(product=device, kind="coverage", ran=timezone.now(), status=status, summary=f"coverage {status}")
        _incident(device, run)
        return run

    with django_capture_on_commit_callbacks(execute=True):
        check("fail")
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["mia@example.org"] and message.subject == "[Belvedere] dcgm-device: coverage incident opened"
    assert "coverage fail" in message.body and "/catalog/dcgm-device/" in message.body
    with django_capture_on_commit_callbacks(execute=True):
        check("fail")  # still failing: the same incident, no new mail
    assert len(mail.outbox) == 1
    api_client.force_authenticate(world["user"])
    assert api_client.post("/api/v1/catalog/subscriptions/", {"product": "dcgm-device", "subscribed": False}, format="json").json()[
        "products"] == []
    with django_capture_on_commit_callbacks(execute=True):
        check("pass")
        check("fail")  # a new incident, but nobody subscribes any more
    assert len(mail.outbox) == 1


def test_the_product_page_offers_the_subscription(world, client):
    from apps.catalog.models import IncidentSubscription

    client.force_login(world["user"])
    page = client.get("/catalog/dcgm-device/").content.decode()
    assert 'id="subscribe"' in page and "Mail me its new incidents" in page
    IncidentSubscription.objects.create(user=world["user"], product=world["device"])
    assert "Stop mailing me its incidents" in client.get("/catalog/dcgm-device/").content.decode()
