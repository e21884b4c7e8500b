"""tests/demo_snapshot.py: a restored demo is the demo that was built (database rows and files alike)."""
import shutil
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command

from tests.demo_snapshot import _folders, load_demo


def fingerprint() -> dict:
    rows = {model._meta.label: model._default_manager.count() for model in apps.get_models()}
    files = {}
    for name, folder in _folders().items():
        files[name] = sorted((str(path.relative_to(folder)), path.stat().st_size)
                             for path in Path(folder).rglob("*") if path.is_file() and ".git" not in path.parts)
    return {"rows": rows, "files": files}


def test_a_restored_demo_has_the_built_ones_rows_and_files(transactional_db, store):
    from apps.telemetry.store import telemetry_store

    load_demo()
    built = fingerprint()
    samples = telemetry_store().check()
    assert built["rows"]["jobs.Job"] > 0 and built["files"]["telemetry-default"], "the demo wrote nothing"
    call_command("flush", interactive=False, verbosity=0)
    for folder in _folders().values():
        shutil.rmtree(folder, ignore_errors=True)
    assert fingerprint()["rows"]["jobs.Job"] == 0

    assert load_demo() == "restored"
    assert fingerprint() == built
    # The restored telemetry store answers with the samples the build wrote (a fresh store object reads the copy).
    assert telemetry_store().check() == samples and " 0 samples" not in samples


def test_a_loaded_demo_is_left_as_it_is(transactional_db, store):
    from apps.jobs.models import Job

    load_demo()
    Job.objects.filter(name__startswith="megatron").update(name="changed by this test")
    assert load_demo() == "loaded"
    assert Job.objects.filter(name="changed by this test").exists()


@pytest.mark.django_db
def test_inside_a_transaction_nothing_is_restored():
    """SQLite's backup cannot write into a connection with an open transaction: load_demo builds instead."""
    from tests.demo_snapshot import _restorable

    assert not _restorable()


@pytest.mark.django_db(transaction=True)  # among the transactional demo readers (tests/conftest.py's demo_order): the
# run's one demo copy serves it; without a database mark it ran last, when the copy was too old, and built a second
def test_a_module_gets_its_database_back_as_it_was(django_db_blocker, django_db_setup):
    from django.contrib.contenttypes.models import ContentType

    from apps.jobs.models import Job
    from tests.demo_snapshot import demo_for_module

    with django_db_blocker.unblock():
        types = ContentType.objects.count()
        jobs = Job.objects.count()
        with demo_for_module():
            assert Job.objects.count() > jobs
        assert Job.objects.count() == jobs and ContentType.objects.count() == types > 0
