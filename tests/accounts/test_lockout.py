"""Login and token throttling (issue 16 item 9): 30 wrong passwords, then the right one, is refused
with an explanation of when to try again; after the lockout window it works again."""
import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.cache import cache
from rest_framework.throttling import ScopedRateThrottle

from apps.jobs.models import Cluster, Job

RIGHT = "right-password-1"


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()  # the API throttles' counters (the lockout counts are in the test database)
    yield
    cache.clear()


@pytest.fixture
def alice(make_user):
    return make_user("alice", password=RIGHT)


def _window_passes(settings):
    """Move every recorded failure back by the lockout window: what waiting it out does."""
    for attempt in AccessAttempt.objects.all():
        AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=attempt.attempt_time - settings.AXES_COOLOFF_TIME
                                                           - timedelta(seconds=1))


def _logged_in(client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.django_db
def test_login_page_locks_out_after_wrong_passwords_and_says_until_when(client, alice, settings):
    for attempt in range(30):
        response = client.post("/accounts/login/", {"username": "alice", "password": f"wrong-{attempt}"})
        assert response.status_code in (200, 429)
    response = client.post("/accounts/login/", {"username": "alice", "password": RIGHT})
    assert response.status_code == 429
    assert not _logged_in(client)
    page = response.content.decode()
    assert "Too many failed logins" in page
    until = re.search(r"blocked until (\d\d:\d\d) UTC \(in (\d+) minutes?\)", page)
    assert until, page
    assert 0 < int(until.group(2)) <= settings.AXES_COOLOFF_TIME.total_seconds() / 60 + 1
    assert 0 < int(response["Retry-After"]) <= settings.AXES_COOLOFF_TIME.total_seconds()
    assert 'name="username"' in page and 'value="alice"' in page  # still the login form, filled in

    # Another address is not locked out for this username (the pair is), nor is another username here.
    assert client.post("/accounts/login/", {"username": "alice", "password": RIGHT}, REMOTE_ADDR="10.9.8.7").status_code == 302
    client.logout()

    _window_passes(settings)
    response = client.post("/accounts/login/", {"username": "alice", "password": RIGHT})
    assert response.status_code == 302 and _logged_in(client)


@pytest.mark.django_db
def test_wrong_passwords_below_the_limit_do_not_lock(client, alice, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "alice", "password": f"wrong-{attempt}"})
        assert response.status_code == 200 and "Too many" not in response.content.decode()
    assert client.post("/accounts/login/", {"username": "alice", "password": RIGHT}).status_code == 302


@pytest.mark.django_db
def test_token_endpoint_locks_out_with_429_retry_after_and_detail(api_client, alice, settings, monkeypatch):
    # The per-address request throttle would answer first at 30 a minute; this test is about the lockout.
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "login", "1000/minute")
    for attempt in range(30):
        response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": f"wrong-{attempt}"}, format="json")
        assert response.status_code in (400, 429)
    response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": RIGHT}, format="json")
    assert response.status_code == 429
    body = response.json()
    assert "token" not in body
    assert body["detail"].startswith("Too many failed logins") and "blocked until" in body["detail"]
    assert body["errors"][0]["message"] == body["detail"]
    assert 0 < int(response["Retry-After"]) <= settings.AXES_COOLOFF_TIME.total_seconds()

    _window_passes(settings)
    response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": RIGHT}, format="json")
    assert response.status_code == 200 and response.json()["token"]


@pytest.mark.django_db
def test_token_endpoint_is_throttled_per_address(api_client, alice, monkeypatch):
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "login", "3/minute")
    for _ in range(3):
        assert api_client.post("/api/v1/auth/token/", {"username": "alice", "password": RIGHT}, format="json").status_code == 200
    response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": RIGHT}, format="json")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "throttled" in response.json()["detail"].lower()
    # X-Forwarded-For is not trusted without a proxy in front: sending one does not reset the count.
    response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": RIGHT}, format="json",
                               HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert response.status_code == 429


@pytest.mark.django_db
def test_job_token_requests_are_throttled_per_user(api_client, alice, make_user, monkeypatch):
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "job_token", "2/hour")
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=7, user_name="alice", state="RUNNING")
    api_client.force_authenticate(alice)
    assert [api_client.post("/api/v1/jobs/alps/7/token/").status_code for _ in range(2)] == [201, 201]
    response = api_client.post("/api/v1/jobs/alps/7/token/")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0 and response.json()["detail"]
    # Another user has their own allowance.
    Job.objects.create(cluster=cluster, job_id=8, user_name="bob", state="RUNNING")
    api_client.force_authenticate(make_user("bob"))
    assert api_client.post("/api/v1/jobs/alps/8/token/").status_code == 201
