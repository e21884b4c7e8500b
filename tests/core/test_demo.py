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


def rows_by_model() -> dict[str, int]:
    """How many rows each of the project's tables holds."""
    from django.apps import apps

    return {model._meta.label: model.objects.count() for model in apps.get_models() if model.__module__.startswith("apps.")}


@pytest.mark.django_db
def test_demo_is_built_once_reproducible_for_a_seed_and_reset_keeps_what_is_not_demo_data(make_user):
    """One story, two builds (a build takes most of a minute on a 2-core machine, minutes on PostgreSQL): built
    once, a second run is a no-op; --reset rebuilds the same demo for the same seed without duplicates in any
    table and without touching what is not demo data. (That another seed gives another demo is the test below,
    on the part that draws the people, instead of a third build.)"""
    make_user("real-person", accounts=["a-real"])
    run_demo("--seed", "7")
    first = snapshot()
    counts = (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count())
    assert DemoState.objects.get().seed == 7

    output = run_demo("--seed", "7")
    assert "already loaded" in output
    assert (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count()) == counts

    rows = rows_by_model()
    run_demo("--reset")  # the loaded demo's seed
    assert snapshot() == first
    assert (get_user_model().objects.count(), Project.objects.count(), Membership.objects.count()) == counts
    # Every part's reset removes what its build made: no table holds more (or fewer) rows after a rebuild. (The
    # vetting part's recommendations, say, were checked by a rebuild of their own in tests/vetting/test_pages.py.)
    assert rows_by_model() == rows
    assert DemoState.objects.get().seed == 7
    assert get_user_model().objects.filter(username="real-person").exists()
    assert Project.objects.filter(slurm_account="a-real").exists()


@pytest.mark.django_db
def test_another_seed_draws_other_people_into_the_projects():
    """The demo's people and memberships come from the seed (the accounts part, alone, in a rolled-back savepoint)."""
    import random

    from django.db import transaction

    from apps.core.demo import DemoContext, registered_parts

    accounts = next(part for part in registered_parts() if part.name == "accounts")

    def drawn(seed: int) -> dict:
        with transaction.atomic():
            accounts.build(DemoContext(seed=seed, rng=random.Random(seed), out=io.StringIO()))
            found = snapshot()
            transaction.set_rollback(True)
        return found

    seven = drawn(7)
    assert seven["memberships"] and drawn(7) == seven
    assert drawn(8)["memberships"] != seven["memberships"]


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
