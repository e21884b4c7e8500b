"""The topology coloured by running job: the user's jobs by name, other people's anonymously."""
import json
import re

import pytest
from django.core.management import call_command

from apps.jobs.models import Cluster, Job, node_search_text


def legend(client) -> list[str]:
    page = client.get("/topology/?color=job").content.decode()
    data = json.loads(re.search(r'<script id="topology-figure-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    return [trace["name"] for trace in data["data"]]


@pytest.fixture
def running(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    cluster = Cluster.objects.create(name="alps")
    for job_id, user, account, nodes, name in [
        (1, "alice", "a-llm01", [f"nid{n:06d}" for n in range(1, 65)], "secret-project"),
        (2, "bob", "a-moe02", [f"nid{n:06d}" for n in range(200, 208)], "bobs-run"),
        (3, "bob", "a-moe02", [f"nid{n:06d}" for n in range(300, 302)], "finished"),
    ]:
        Job.objects.create(cluster=cluster, job_id=job_id, user_name=user, account=account, name=name, node_list=nodes,
                           node_count=len(nodes), state="COMPLETED" if job_id == 3 else "RUNNING", node_search=node_search_text(nodes))


def test_a_user_sees_their_jobs_named_and_others_anonymous(running, client, make_user):
    client.force_login(make_user("bob"))
    names = legend(client)
    assert "alps/2 bobs-run (8)" in names
    assert "other users' jobs (64)" in names
    assert not any("secret-project" in name or "alps/1" in name for name in names)
    assert "no running job (2616)" in names  # finished jobs do not count


def test_staff_see_every_running_job(running, client, make_user):
    client.force_login(make_user("root", is_staff=True))
    names = legend(client)
    assert "alps/1 secret-project (64)" in names and "alps/2 bobs-run (8)" in names
