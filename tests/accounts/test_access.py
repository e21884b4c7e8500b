"""Authorization matrix for projects: members see their own, staff see all, strangers nothing."""
import pytest


@pytest.fixture
def people(make_user):
    return {
        "alice": make_user("alice", accounts=["a-llm01", "a-clim03"]),
        "bob": make_user("bob", accounts=["a-moe02"]),
        "carol": make_user("carol"),
        "staff": make_user("staff", is_staff=True),
    }


EXPECTED_ACCOUNTS = {
    "alice": {"a-llm01", "a-clim03"},
    "bob": {"a-moe02"},
    "carol": set(),
    "staff": {"a-llm01", "a-clim03", "a-moe02"},
}


@pytest.mark.django_db
@pytest.mark.parametrize("viewer", sorted(EXPECTED_ACCOUNTS))
def test_project_list_shows_exactly_what_the_viewer_may_see(api_client, people, viewer):
    api_client.force_authenticate(people[viewer])
    body = api_client.get("/api/v1/projects/").json()
    assert {project["slurm_account"] for project in body["results"]} == EXPECTED_ACCOUNTS[viewer]


@pytest.mark.django_db
@pytest.mark.parametrize("viewer", sorted(EXPECTED_ACCOUNTS))
def test_project_detail_of_a_foreign_project_is_404(api_client, people, viewer):
    from apps.accounts.models import Project

    api_client.force_authenticate(people[viewer])
    for project in Project.objects.all():
        status = api_client.get(f"/api/v1/projects/{project.pk}/").status_code
        assert status == (200 if project.slurm_account in EXPECTED_ACCOUNTS[viewer] else 404), project


@pytest.mark.django_db
def test_staff_page_is_forbidden_to_researchers_and_hidden_from_their_navigation(client, people):
    client.force_login(people["alice"])
    assert client.get("/staff/").status_code == 403
    assert 'data-nav="staff"' not in client.get("/").content.decode()
    client.force_login(people["staff"])
    assert 'data-nav="staff"' in client.get("/").content.decode()


@pytest.mark.django_db
def test_home_lists_only_the_users_own_projects(client, people):
    client.force_login(people["bob"])
    page = client.get("/").content.decode()
    assert "a-moe02" in page
    assert "a-llm01" not in page
