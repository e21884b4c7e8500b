"""Fixtures shared by the ranks API tests: alice's running job on the alps topology."""
import pytest
from django.core.management import call_command


@pytest.fixture
def alps_job(db):
    """Build alice's running job on the given nodes (4 GPUs each) on the alps topology preset."""
    from apps.jobs.models import Cluster, Job, node_search_text

    def make(nodes: list[str]) -> Job:
        call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
        cluster = Cluster.objects.create(name="alps")
        return Job.objects.create(cluster=cluster, job_id=1, user_name="alice", account="a-llm01", state="RUNNING",
                                  node_list=nodes, node_count=len(nodes), tasks=4 * len(nodes), gpus=4 * len(nodes),
                                  node_search=node_search_text(nodes))

    return make


@pytest.fixture
def alice(api_client, make_user, job):
    api_client.force_authenticate(make_user("alice"))
    return api_client
