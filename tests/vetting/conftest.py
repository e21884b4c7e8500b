"""Vetting fixtures: the reference topology, a job on it, and people with and without access."""
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

NODES = ["nid001234", "nid001235"]


@pytest.fixture
def topology(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))


@pytest.fixture
def job(topology):
    from apps.jobs.models import Cluster, Job, node_search_text

    start = timezone.now() - timedelta(minutes=30)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4242, user_name="alice", account="a-llm01",
                              state="RUNNING", submit_time=start, start_time=start, node_list=NODES, node_count=2,
                              node_search=node_search_text(NODES))


@pytest.fixture
def people(make_user):
    return {"alice": make_user("alice"), "mia": make_user("mia", accounts=["a-llm01"]), "bob": make_user("bob"),
            "ops": make_user("ops", is_staff=True)}


# The private Slurm 22.05 cluster of the jobs tests (own munged, slurmctld, four slurmd nid000001-4).
from tests.jobs.conftest import slurm_cluster  # noqa: E402,F401 - a fixture, used by test_slurm_drain


@pytest.fixture
def slurm_env(monkeypatch, slurm_cluster):  # noqa: F811 - the fixture imported above
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster
