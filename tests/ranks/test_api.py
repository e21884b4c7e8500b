"""Layout and ranks API: paths 1 (sizes) and 2 (exact map, log), permissions, errors."""
import pytest
from django.core.management import call_command

from apps.jobs.models import Cluster, Job, JobToken, node_search_text
from apps.ranks.models import JobLayout

NODES = [f"nid{n:06d}" for n in range(1, 129)]


@pytest.fixture
def job(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    cluster = Cluster.objects.create(name="alps")
    other = Job.objects.create(cluster=cluster, job_id=2, user_name="mallory", state="RUNNING", node_list=NODES[:2], node_count=2)
    job = Job.objects.create(cluster=cluster, job_id=1, user_name="alice", account="a-llm01", state="RUNNING", node_list=NODES,
                             node_count=128, tasks=512, gpus=512, node_search=node_search_text(NODES))
    job.other = other
    return job


@pytest.fixture
def alice(api_client, make_user, job):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def test_sizes_give_megatrons_worked_example(alice, job):
    body = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 8}, format="json").json()
    assert body["layout"]["dp"] == 16 and body["layout"]["exact_map"] is False
    ranks = alice.get("/api/v1/jobs/alps/1/ranks/?dp=1&tp=0").json()
    # Replica 1, tensor lane 0: the pp group of rank 4; block placement puts rank r on node r // 4.
    assert [r["rank"] for r in ranks] == [4, 68, 132, 196, 260, 324, 388, 452]
    assert [r["host"] for r in ranks] == [NODES[rank // 4] for rank in (4, 68, 132, 196, 260, 324, 388, 452)]
    assert all(r["local_rank"] == 0 and r["nic"] == "hsn0" for r in ranks)
    pipeline = body["pipeline"]
    assert pipeline["boundaries"] == 64 * 7
    # Nodes 1-112 are group 0, 113-128 group 1: only stage 6 → 7 (nodes 97+d → 113+d) leaves the group.
    assert pipeline["inter_group"] == 16 * 4
    assert pipeline["verdict"].startswith("64 of 448 pipeline boundaries are inter-group; e.g. stage 6→7 of replica 0")


def test_exact_rank_map_replaces_block_placement(alice, job):
    reversed_map = [{"rank": r, "host": NODES[127 - r // 4], "local_rank": r % 4} for r in range(512)]
    body = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 8, "ranks": reversed_map}, format="json").json()
    assert body["layout"]["exact_map"] is True
    [rank0] = alice.get("/api/v1/jobs/alps/1/ranks/?dp=0&pp=0&tp=0").json()
    assert rank0["host"] == "nid000128" and rank0["group"] == 1


@pytest.mark.parametrize("payload, field, text", [
    ({"tp": 4, "pp": 7}, None, "does not divide the world size 512"),
    ({"tp": 4, "pp": 8, "order": "tp-xx-dp-pp"}, None, "unknown token"),
    ({"tp": 4, "pp": 8, "ranks": [{"rank": 0, "host": "nid999999", "local_rank": 0}]}, "ranks.0.host", "not one of this job's nodes"),
    ({"tp": 1, "pp": 1, "ranks": [{"rank": 0, "host": "nid000001", "local_rank": 0}, {"rank": 0, "host": "nid000002", "local_rank": 0}]},
     "ranks.1.rank", "appears twice"),
    ({"tp": 0, "pp": 8}, "tp", "greater than or equal to 1"),
])
def test_bad_layouts_are_explained_and_nothing_is_stored(alice, job, payload, field, text):
    response = alice.put("/api/v1/jobs/alps/1/layout/", payload, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(error["field"] == field and text in error["message"] for error in errors), errors
    assert not JobLayout.objects.exists()


def test_who_may_write_the_layout(api_client, make_user, job):
    payload = {"tp": 4, "pp": 8}
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))  # may see, may not change
    assert api_client.put("/api/v1/jobs/alps/1/layout/", payload, format="json").status_code == 403
    api_client.force_authenticate(make_user("oscar"))
    assert api_client.put("/api/v1/jobs/alps/1/layout/", payload, format="json").status_code == 404
    from rest_framework.test import APIClient

    _, other_key = JobToken.issue(job.other)
    foreign = APIClient()
    foreign.credentials(HTTP_AUTHORIZATION=f"JobToken {other_key}")
    assert foreign.put("/api/v1/jobs/alps/1/layout/", payload, format="json").status_code == 404  # another job's token
    assert not JobLayout.objects.exists()
    _, own_key = JobToken.issue(job)
    inside = APIClient()
    inside.credentials(HTTP_AUTHORIZATION=f"JobToken {own_key}")
    assert inside.put("/api/v1/jobs/alps/1/layout/", payload, format="json").status_code == 200
    assert JobLayout.objects.get().submitted_by == "job:alps/1"


def test_ranks_without_layout_and_bad_filters(alice, job):
    response = alice.get("/api/v1/jobs/alps/1/ranks/")
    assert response.status_code == 404 and "no layout yet" in response.json()["detail"]
    alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 8}, format="json")
    response = alice.get("/api/v1/jobs/alps/1/ranks/?pp=6-x")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "pp"
    assert len(alice.get("/api/v1/jobs/alps/1/ranks/?pp=6-7").json()) == 2 * 64
