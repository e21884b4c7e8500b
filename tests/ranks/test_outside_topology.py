"""A job whose hosts are not all in the topology: its ranks are still mapped to hosts exactly, and the
API and the job page say which hosts have no NIC placement (issue 16: it was a 500, PlacementError)."""
import pytest

from apps.ranks.layout import block_placement

KNOWN = [f"nid{n:06d}" for n in range(1, 7)]
OUTSIDE = ["nid999001", "nid999002"]
NODES = KNOWN[:3] + OUTSIDE + KNOWN[3:]  # Slurm's order: the outside hosts hold ranks 12-19


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


def test_sizes_only_layout_maps_every_rank_and_names_the_unplaced_hosts(alice, job):
    response = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    placement = body["placement"]
    assert placement["hosts_not_in_topology"] == OUTSIDE and placement["hosts_without_nic_placement"] == OUTSIDE
    assert placement["ranks_without_nic"] == 8 and placement["nics_missing"] == []
    assert "8 of 32 ranks have no NIC placement: 2 host(s) are not in the topology (nid999001, nid999002)" in placement["message"]
    assert alice.get("/api/v1/jobs/alps/1/layout/").json()["placement"] == placement

    rows = alice.get("/api/v1/jobs/alps/1/ranks/").json()
    expected = block_placement(32, NODES, 4)
    assert [(row["host"], row["local_rank"]) for row in rows] == expected  # exactly Slurm's block placement
    for row in rows:
        if row["host"] in OUTSIDE:
            assert (row["nic"], row["switch"], row["group"]) == (None, None, None)
        else:
            assert row["nic"] == f"hsn{row['local_rank']}" and row["group"] == 0 and row["switch"].startswith("0.")
    # Coordinates still come from the layout: rank 13 is tp 1 of replica 3, stage 0 (dp = 4).
    assert {key: rows[13][key] for key in ("tp", "dp", "pp")} == {"tp": 1, "dp": 3, "pp": 0}

    # pp groups pair rank r with r + 16: ranks 0-3 meet 16-19 and 12-15 meet 28-31, the outside hosts; the
    # other 8 link lane i of nid000002-03 with lane i of nid000005-06, on the same switch in this topology.
    pipeline = body["pipeline"]
    assert pipeline["boundaries"] == 16 and pipeline["inter_group"] == 0
    assert pipeline["verdict"] == ("All 8 placed pipeline boundaries stay inside one dragonfly group and on one switch; "
                                   "0 cross switches. "
                                   "8 of 16 boundaries involve ranks without NIC placement and are not classified.")
    spans = {span["kind"]: span for span in body["communicators"]}
    assert spans["tp"]["groups_with_unplaced_ranks"] == 2  # ranks 12-15 and 16-19: one node each
    # tp groups are one node each (tp 4 = the node's 4 GPUs): NVLink only, so no switch counts for them.
    assert (spans["tp"]["inside_node"], spans["tp"]["max_switches"]) == (spans["tp"]["groups"], 0)
    assert spans["pp"]["max_dragonfly_groups"] == 1
    assert spans["dp"]["groups_with_unplaced_ranks"] == 8  # every dp group has a replica on an outside host


def test_exact_rank_map_with_outside_hosts(alice, job):
    reversed_map = [{"rank": r, "host": NODES[7 - r // 4], "local_rank": 3 - r % 4} for r in range(32)]
    response = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2, "ranks": reversed_map}, format="json")
    assert response.status_code == 200, response.content
    rows = alice.get("/api/v1/jobs/alps/1/ranks/?pp=0").json()
    assert [(row["rank"], row["host"], row["local_rank"]) for row in rows] == [
        (r, NODES[7 - r // 4], 3 - r % 4) for r in range(16)]
    assert [row["rank"] for row in rows if row["group"] is None] == list(range(12, 16))  # on nid999002


def test_job_page_shows_the_layout_and_the_hosts_without_nic_placement(client, make_user, alice, job):
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").status_code == 200
    client.force_login(make_user("alice-web", accounts=["a-llm01"]))
    response = client.get("/jobs/alps/1/?sel_dp=3")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="rank-gaps"' in page and "<code>nid999001</code>, <code>nid999002</code>" in page
    assert "8 of 32 ranks have no NIC placement" in page
    assert "no NIC placement in the topology" in page  # the grid cells of the outside hosts
    assert "8 ranks selected" in page


def test_a_layout_that_no_longer_fits_the_job_is_explained(client, make_user, alice, job):
    """The job's node list shrank after the layout was stored (e.g. Slurm requeued it): 409 and a note, not a 500."""
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").status_code == 200
    job.node_list, job.node_count = NODES[:4], 4
    job.save()
    for url in ("/api/v1/jobs/alps/1/layout/", "/api/v1/jobs/alps/1/ranks/"):
        response = alice.get(url)
        assert response.status_code == 409, response.content
        assert response.json()["detail"].startswith("The stored layout no longer fits this job: world size 32 needs 8 nodes")
    client.force_login(make_user("alice-web", accounts=["a-llm01"]))
    page = client.get("/jobs/alps/1/").content.decode()
    assert 'id="rank-layout-problem"' in page and "Set the layout again." in page
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").status_code == 200  # 16 ranks now


def test_a_cluster_without_topology_stores_a_context_parallel_layout(db, api_client, make_user, client):
    """Issue 33, finding 3a: a cluster whose topology was never imported (no switch, no group known) was a
    500 (IndexError in communicator_spans) on every layout PUT. The layout is stored, every rank keeps its
    host and GPU, and the switch and group counts say that no rank could be placed."""
    from apps.jobs.models import Cluster, Job, node_search_text

    nodes = [f"nid{n:06d}" for n in range(1, 5)]
    Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=1, user_name="alice", account="a-llm01",
                       state="RUNNING", node_list=nodes, node_count=4, tasks=16, gpus=16, node_search=node_search_text(nodes))
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    response = api_client.put("/api/v1/jobs/alps/1/layout/", {"tp": 2, "cp": 2, "pp": 2}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["layout"]["cp"], body["layout"]["dp"]) == (2, 2)
    assert body["placement"]["ranks_without_nic"] == 16 and body["placement"]["hosts_not_in_topology"] == nodes
    spans = {span["kind"]: span for span in body["communicators"]}
    # cp groups (ranks r, r + 2) share a node: NVLink only; dp-cp groups cross nodes, none of them placed.
    assert (spans["cp"]["groups"], spans["cp"]["inside_node"]) == (8, 8)
    assert spans["dp-cp"]["max_nodes"] == 2 and spans["dp-cp"]["groups_with_unplaced_ranks"] == 4
    assert all(span["max_switches"] == span["max_dragonfly_groups"] == 0 for span in spans.values())
    assert body["pipeline"]["verdict"].startswith("None of the 8 pipeline boundaries can be placed")
    assert api_client.get("/api/v1/jobs/alps/1/layout/").json() == body
    rows = api_client.get("/api/v1/jobs/alps/1/ranks/?cp=1").json()
    assert len(rows) == 8 and all(row["group"] is None and row["host"] in nodes for row in rows)
    assert api_client.get("/api/v1/jobs/alps/1/ranks/figure/").status_code == 200
    client.force_login(make_user("alice-web", accounts=["a-llm01"]))
    page = client.get("/jobs/alps/1/")
    assert page.status_code == 200 and "16 of 16 ranks have no NIC placement" in page.content.decode()
