"""Server-rendered pages: login required, navigation complete, errors friendly."""
import pytest

from apps.core.navigation import NAVIGATION


@pytest.mark.django_db
@pytest.mark.parametrize("item", NAVIGATION, ids=lambda item: item.key)
def test_every_navigation_page_needs_a_login_then_renders(client, make_user, item):
    from django.urls import reverse

    url = reverse(item.url_name)
    if item.key != "api":  # the API docs are public, like the schema they show
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(make_user("staff", is_staff=True))
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_navigation_marks_the_current_section(client, make_user):
    client.force_login(make_user("alice"))
    page = client.get("/vetting/").content.decode()
    assert 'href="/vetting/" aria-current="page"' in page
    assert 'href="/jobs/" aria-current="page"' not in page


@pytest.mark.django_db
def test_login_and_logout_round_trip(client, make_user):
    make_user("alice", password="right-password-1")
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    response = client.post("/accounts/login/", {"username": "alice", "password": "right-password-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_unknown_page_is_a_friendly_404(client, make_user, settings):
    settings.DEBUG = False
    client.force_login(make_user("alice"))
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert "There is nothing at this address" in response.content.decode()


@pytest.mark.django_db
def test_staff_page_shows_people_and_background_work(client, make_user):
    from apps.core.models import Heartbeat, TaskRun

    make_user("alice", accounts=["a-llm01"])
    Heartbeat.beat("beat")
    TaskRun.objects.create(name="jobs.sync_cluster", subject="cluster alps", total=10, done=4)
    client.force_login(make_user("staff", is_staff=True))
    page = client.get("/staff/").content.decode()
    assert "a-llm01" in page
    assert "jobs.sync_cluster" in page and "cluster alps" in page
    assert "<strong>beat</strong>" in page


@pytest.mark.django_db
def test_disallowed_host_is_a_400_page_not_a_500(client):
    # The error page renders before authentication middleware has set request.user.
    response = client.get("/accounts/login/", HTTP_HOST="evil.example.com")
    assert response.status_code == 400
    assert "could not be understood" in response.content.decode()


@pytest.mark.django_db
def test_disallowed_host_under_the_api_is_a_400_in_the_common_format(client):
    response = client.get("/api/v1/me/", HTTP_HOST="evil.example.com")
    assert response.status_code == 400
    assert response.json() == {"detail": "The request could not be understood.", "errors": []}
