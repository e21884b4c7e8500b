"""`manage.py demo`: reproducible, built once, rebuilt on --reset, printed logins work."""
import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.accounts.models import Membership, Project
from apps.core.models import DemoState
from tests.demo_snapshot import load_demo


def run_demo(*args) -> str:
    out = io.StringIO()
    call_command("demo", *args, stdout=out)
    return out.getvalue()


def snapshot() -> dict:
    return {
        "users": sorted(get_user_model().objects.values_list("username", "first_name", "last_name", "is_staff")),
        "projects": sorted(Project.objects.values_list("slurm_account", "title")),
        "memberships": sorted(Membership.objects.values_list("user__username", "project__slurm_account", "role")),
    }


@pytest.mark.django_db
def test_demo_is_built_once_reproducible_for_a_seed_and_reset_keeps_what_is_not_demo_data(make_user):
    """One story, three builds (a build takes most of a minute on a 2-core machine): built once, a second
    run is a no-op; --reset rebuilds the same demo for the same seed without duplicates and without
    touching what is not demo data; another seed gives another demo."""
    make_user("real-person", accounts=["a-real"])
    run_demo("--seed", "7")
    first = snapshot()
    counts = (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count())

    output = run_demo("--seed", "7")
    assert "already loaded" in output
    assert (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count()) == counts

    run_demo("--reset", "--seed", "7")
    assert snapshot() == first
    assert (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count()) == counts
    assert DemoState.objects.count() == 1
    assert get_user_model().objects.filter(username="real-person").exists()
    assert Project.objects.filter(slurm_account="a-real").exists()

    run_demo("--reset", "--seed", "8")
    assert snapshot()["memberships"] != first["memberships"]
    assert DemoState.objects.get().seed == 8
    assert get_user_model().objects.filter(username="real-person").exists()


@pytest.mark.engine_independent  # logins and roles; the build's engine behaviour is the test above
def test_printed_logins_work_and_have_the_promised_roles(transactional_db, client):
    load_demo()  # the run's demo (tests/demo_snapshot.py); the command prints the logins of a loaded demo too
    output = run_demo()
    assert "already loaded" in output
    logins = re.findall(r"^\s+(\w+)\s+user '([^']+)'\s+password '([^']+)'$", output, re.MULTILINE)
    assert {role for role, _, _ in logins} == {"researcher", "staff"}
    for role, username, password in logins:
        assert client.login(username=username, password=password), username
        assert client.get("/staff/").status_code == (200 if role == "staff" else 403)
        client.logout()
    demo_user = get_user_model().objects.get(username="demo")
    assert demo_user.projects.count() == 2
    # The demo researcher shares each project with other people.
    for project in demo_user.projects.all():
        assert project.members.count() > 1


@pytest.mark.django_db
def test_demo_refuses_the_production_profile(settings):
    settings.BELVEDERE_PROFILE = "production"
    with pytest.raises(CommandError, match="embedded profile only"):
        run_demo()
    assert not get_user_model().objects.exists()
