"""Token authentication: issued by the management command, the API and the profile page."""
import io

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token


@pytest.mark.django_db
def test_drf_create_token_command_issues_a_working_token(api_client, make_user):
    make_user("alice", accounts=["a-llm01"])
    out = io.StringIO()
    call_command("drf_create_token", "alice", stdout=out)
    key = out.getvalue().split()[2]
    assert Token.objects.get(user__username="alice").key == key
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = api_client.get("/api/v1/me/")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"
    assert [p["slurm_account"] for p in response.json()["projects"]] == ["a-llm01"]


@pytest.mark.django_db
def test_token_endpoint_exchanges_password_for_token(api_client, make_user):
    make_user("alice", password="right-password-1")
    response = api_client.post("/api/v1/auth/token/", {"username": "alice", "password": "right-password-1"}, format="json")
    assert response.status_code == 200
    assert response.json()["token"] == Token.objects.get(user__username="alice").key


@pytest.mark.django_db
def test_profile_page_replaces_and_revokes_the_token(client, api_client, make_user):
    user = make_user("alice")
    client.force_login(user)
    client.post("/accounts/profile/", {"action": "issue"})
    first = Token.objects.get(user=user).key
    page = client.get("/accounts/profile/").content.decode()
    assert first in page  # shown once, right after issuing
    assert first not in client.get("/accounts/profile/").content.decode()
    client.post("/accounts/profile/", {"action": "issue"})
    second = Token.objects.get(user=user).key
    assert second != first
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    assert api_client.get("/api/v1/me/").status_code == 401
    client.post("/accounts/profile/", {"action": "revoke"})
    assert not Token.objects.filter(user=user).exists()
