"""Who sees and switches a project's notifications: members see, managers and staff switch, anyone else gets 404;
the page lists the mails about jobs the user may see."""
import pytest
from django.utils import timezone

from apps.accounts.models import Membership
from apps.notifications.models import NotificationSent, ProjectNotifications

pytestmark = pytest.mark.django_db
URL = "/api/v1/notifications/projects/{}/"


@pytest.fixture
def team(make_user):
    manager = make_user("mona", accounts=["a-team"])
    Membership.objects.filter(user=manager).update(role="manager")
    member = make_user("mike", accounts=["a-team"])
    stranger = make_user("sam", accounts=["a-other"])
    staff = make_user("root", is_staff=True)
    return {"manager": manager, "member": member, "stranger": stranger, "staff": staff}


def test_members_read_and_strangers_get_404(api_client, team):
    api_client.force_authenticate(team["member"])
    response = api_client.get(URL.format("a-team"))
    assert response.status_code == 200
    assert response.json() | {"modified": None} == {"project": "a-team", "title": "Project a-team", "waste": False,
                                                     "straggler": False, "changed_by": "", "modified": None,
                                                     "may_change": False, "managers": ["mona"]}
    api_client.force_authenticate(team["stranger"])
    assert api_client.get(URL.format("a-team")).status_code == 404
    assert api_client.patch(URL.format("a-team"), {"waste": True}, format="json").status_code == 404
    assert api_client.get(URL.format("no-such")).status_code == 404
    api_client.force_authenticate(None)
    assert api_client.get(URL.format("a-team")).status_code in (401, 403)


def test_a_member_may_not_switch_a_manager_and_staff_may(api_client, team):
    api_client.force_authenticate(team["member"])
    response = api_client.patch(URL.format("a-team"), {"waste": True}, format="json")
    assert response.status_code == 403 and "managers" in response.json()["detail"]
    assert not ProjectNotifications.objects.exists()

    api_client.force_authenticate(team["manager"])
    response = api_client.patch(URL.format("a-team"), {"waste": True}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["waste"], response.json()["straggler"], response.json()["changed_by"]) == (True, False, "mona")
    row = ProjectNotifications.objects.get(project__slurm_account="a-team")
    assert (row.waste, row.straggler) == (True, False)

    api_client.force_authenticate(team["staff"])
    response = api_client.patch(URL.format("a-team"), {"straggler": True}, format="json")
    assert response.status_code == 200 and response.json()["may_change"] is True
    row.refresh_from_db()
    assert (row.waste, row.straggler, row.changed_by) == (True, True, "root")  # the untouched switch stays


@pytest.mark.parametrize("body, field", [({"waste": "maybe"}, "waste"), ({}, None), ({"wast": True}, "wast"),
                                         ([1, 2], None), ({"waste": True, "project": "a-other"}, "project")])
def test_bad_patches_are_400_with_a_clear_message(api_client, team, body, field):
    api_client.force_authenticate(team["manager"])
    response = api_client.patch(URL.format("a-team"), body, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert errors and errors[0]["field"] == field and errors[0]["message"]
    assert not ProjectNotifications.objects.exists()


def _mail(job, **values):
    return NotificationSent.objects.create(job=job, reason="wasteful", status="sent", recipient=f"{job.user_name}@x.org",
                                           user_name=job.user_name, sent_at=timezone.now(), subject=f"mail about {job.job_id}",
                                           **values)


def test_the_page_states_the_verdict_and_lists_only_visible_mails(client, team, running_job):
    ProjectNotifications.objects.create(project=team["manager"].projects.get(), waste=True)
    _mail(running_job("a-team", "mike", 111))
    _mail(running_job("a-other", "sam", 222))
    client.force_login(team["member"])
    page = client.get("/notifications/").content.decode()
    assert "Mail is on for 1 of your 1 project" in page and "wasteful jobs" in page
    assert "mail about 111" in page and "mail about 222" not in page
    assert "notify-form" not in page  # a member sees the switches, cannot flip them
    assert "Your account has no e-mail address" in page
    client.force_login(team["stranger"])
    page = client.get("/notifications/").content.decode()
    assert "Mail is off for all your project" in page and "mail about 111" not in page and "mail about 222" in page
    client.force_login(team["manager"])
    assert 'class="notify-form"' in client.get("/notifications/").content.decode()


def test_the_page_form_switches_for_managers_only(client, team):
    client.force_login(team["member"])
    assert client.post("/notifications/", {"account": "a-team", "waste": "on"}).status_code == 403
    client.force_login(team["stranger"])
    assert client.post("/notifications/", {"account": "a-team", "waste": "on"}).status_code == 404
    assert not ProjectNotifications.objects.exists()
    client.force_login(team["manager"])
    response = client.post("/notifications/", {"account": "a-team", "straggler": "on"})
    assert response.status_code == 302
    row = ProjectNotifications.objects.get()
    assert (row.waste, row.straggler) == (False, True)


def test_the_sent_list_api_shows_only_visible_jobs(api_client, team, running_job):
    _mail(running_job("a-team", "mike", 333))
    _mail(running_job("a-other", "sam", 444))
    api_client.force_authenticate(team["member"])
    assert [row["job"] for row in api_client.get("/api/v1/notifications/sent/").json()] == ["alps/333"]
    api_client.force_authenticate(team["staff"])
    assert sorted(row["job"] for row in api_client.get("/api/v1/notifications/sent/").json()) == ["alps/333", "alps/444"]


@pytest.mark.parametrize("identity", ["member", "staff"])
def test_queries_do_not_grow_with_projects_and_mails(client, api_client, team, running_job, identity):
    """The page and the APIs ask the same number of queries for 1 project and mail as for 6 of each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.accounts.models import Project

    user = team[identity]
    client.force_login(user)
    api_client.force_authenticate(user)
    paths = ["/notifications/", "/api/v1/notifications/sent/", URL.format("a-team")]

    def counts():
        found = []
        for index, path in enumerate(paths):
            with CaptureQueriesContext(connection) as captured:
                response = (client if index == 0 else api_client).get(path)
            assert response.status_code == 200, (path, response.status_code)
            found.append(len(captured))
        return found

    ProjectNotifications.objects.create(project=Project.objects.get(slurm_account="a-team"), waste=True)
    _mail(running_job("a-team", "mike", 500))
    small = counts()
    for index in range(5):
        project = Project.objects.create(slurm_account=f"a-more{index}", title=f"More {index}")
        Membership.objects.create(user=user, project=project, role="manager" if index % 2 else "member")
        ProjectNotifications.objects.create(project=project, straggler=True)
        _mail(running_job("a-team", "mike", 600 + index))
        _mail(running_job(f"a-more{index}", "mona", 700 + index))
    large = counts()
    assert large == small, dict(zip(paths, zip(small, large)))
    assert max(large) <= 12


def test_the_page_says_when_mail_does_not_leave_and_when_jobs_were_last_checked(client, team, settings):
    from apps.core.models import TaskRun

    client.force_login(team["member"])
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    page = client.get("/notifications/").content.decode()
    assert 'id="notify-no-delivery"' in page and "never checked" in page
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    run = TaskRun.objects.create(name="notifications.notify_running_jobs", subject="s")
    run.start("looking")
    run.finish()
    page = client.get("/notifications/").content.decode()
    assert 'id="notify-no-delivery"' not in page and "Running jobs last checked" in page and "never checked" not in page


def test_the_weeks_counts_cover_every_mail_not_only_those_listed(client, team, running_job):
    """The page lists the latest 50 mails; its 'last 7 days' counts used to be taken from those 50 only."""
    from datetime import timedelta

    job = running_job("a-team", "mike", 333)
    now = timezone.now()
    NotificationSent.objects.bulk_create(
        [NotificationSent(job=job, reason="wasteful", status="sent", recipient="mike@x.org", user_name="mike",
                          sent_at=now - timedelta(minutes=n), subject=f"mail {n}") for n in range(60)]
        + [NotificationSent(job=job, reason="wasteful", status="skipped", recipient="", user_name="mike",
                            sent_at=now - timedelta(hours=2, minutes=n), subject=f"skipped {n}") for n in range(3)]
        + [NotificationSent(job=job, reason="wasteful", status="sent", recipient="mike@x.org", user_name="mike",
                            sent_at=now - timedelta(days=8), subject="older")])
    other = running_job("a-other", "sam", 444)
    _mail(other)  # not visible to the member
    client.force_login(team["member"])
    page = " ".join(client.get("/notifications/").content.decode().split())
    assert "In the last 7 days: 60 sent, 3 skipped about jobs you can see" in page


@pytest.mark.django_db
def test_the_home_page_says_whether_mail_is_on_for_the_users_projects(client, team):
    from apps.accounts.models import Project
    from apps.notifications.models import ProjectNotifications

    client.force_login(team["member"])
    page = client.get("/").content.decode()
    assert "Mail about your jobs" in page and "Off for all 1 of your project" in page
    ProjectNotifications.objects.create(project=Project.objects.get(slurm_account="a-team"), waste=True)
    page = client.get("/").content.decode()
    assert "On for 1 of 1 project" in page and "<code>a-team</code> (wasteful jobs)" in page
    assert 'href="/notifications/"' in page and "See the switches" in page  # a member does not switch them
