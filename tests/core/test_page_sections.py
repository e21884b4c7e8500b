"""The portal's home and staff pages show what other apps register (apps.core.page_sections), without core
importing them: the jobs app's Slurm clusters and the accounts app's people and projects on the staff page, the
user's projects on the home page."""
import pytest

from apps.core.page_sections import PageSection, register_page_section, unregister_page_section


@pytest.fixture
def staff(client, make_user):
    client.force_login(make_user("ops", is_staff=True))
    return client


@pytest.mark.django_db
def test_the_staff_page_shows_the_clusters_and_people_the_apps_register(staff, make_user):
    from apps.jobs.models import Cluster

    Cluster.objects.create(name="alps")
    make_user("alice", accounts=["a-llm01"])
    page = staff.get("/staff/").content.decode()
    assert '<th scope="row">alps</th>' in page
    assert "2 users, of whom 1 staff; 1 projects shown." in page and "<code>a-llm01</code>" in page
    # Services first, then the clusters across the page; people beside the background work.
    services, clusters = page.index("readiness-heading"), page.index("clusters-heading")
    row, people, work = page.index('<div class="grid-2">'), page.index("people-heading"), page.index("tasks-heading")
    assert services < clusters < row < people < work


@pytest.mark.django_db
def test_the_home_page_shows_the_users_own_projects(client, make_user):
    make_user("bob", accounts=["a-moe02"])
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/").content.decode()
    assert "Your projects" in page and "<code>a-llm01</code>" in page and "a-moe02" not in page


@pytest.fixture
def notice(settings, tmp_path):
    """A section of the test's own, with its template in a folder of its own."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "_notice.html").write_text('<section id="notice">{{ words }} for {{ user.get_username }}</section>\n')
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [*settings.TEMPLATES[0]["DIRS"], tmp_path]}]
    yield
    unregister_page_section("staff", "notice")


@pytest.mark.django_db
def test_a_registered_section_takes_its_place_by_order(staff, notice):
    register_page_section(PageSection(page="staff", key="notice", order=5, template="tests/_notice.html",
                                      context=lambda request: {"words": "maintenance at noon"}))
    page = staff.get("/staff/").content.decode()
    assert '<section id="notice">maintenance at noon for ops</section>' in page
    assert page.index("readiness-heading") < page.index('id="notice"') < page.index("clusters-heading")
    register_page_section(PageSection(page="staff", key="notice", order=30, template="tests/_notice.html",
                                      context=lambda request: {"words": "later"}, half=True))
    page = staff.get("/staff/").content.decode()
    assert page.index("people-heading") < page.index('id="notice"') < page.index("tasks-heading")
    assert "Projects" in staff.get("/").content.decode() and 'id="notice"' not in staff.get("/").content.decode()


@pytest.mark.django_db
def test_a_section_of_order_zero_is_the_staff_pages_verdict_before_the_services(staff, notice):
    register_page_section(PageSection(page="staff", key="notice", order=-1, template="tests/_notice.html",
                                      context=lambda request: {"words": "three jobs waste GPUs"}))
    page = staff.get("/staff/").content.decode()
    assert page.count('id="notice"') == 1
    assert page.index('id="notice"') < page.index("readiness-heading") < page.index("clusters-heading")
    # The triage inbox is registered so: it opens the page.
    assert page.index('id="notice"') < page.index('id="triage"') < page.index("readiness-heading")


def test_a_section_names_a_page_that_exists():
    with pytest.raises(ValueError, match="page 'jobs' is not one of home, staff"):
        PageSection(page="jobs", key="x", order=1, template="x.html", context=dict)
