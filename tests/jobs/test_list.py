"""Job list filters, shared by the page and the API; and the job page's sections."""
from datetime import datetime, timedelta, timezone

import pytest

from apps.jobs.models import Cluster, Job, node_search_text

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def jobs(db):
    cluster = Cluster.objects.create(name="alps")
    specs = [
        (1, "alice", "a-llm01", "COMPLETED", "normal", ["nid000001", "nid000002"], 0, "pretrain-llama"),
        (2, "alice", "a-llm01", "FAILED", "debug", ["nid000003"], 2, "eval-llama"),
        (3, "bob", "a-llm01", "RUNNING", "normal", [f"nid{n:06d}" for n in range(10, 138)], 5, "megatron-gpt"),
        (4, "bob", "a-moe02", "PENDING", "normal", [], 7, "moe-sweep"),
        (5, "carol", "a-moe02", "CANCELLED", "normal", ["nid000002"], 9, "pretrain-moe"),
    ]
    for job_id, user, account, state, partition, nodes, hours, name in specs:
        Job.objects.create(cluster=cluster, job_id=job_id, user_name=user, account=account, state=state, partition=partition,
                           node_list=nodes, node_count=len(nodes) or None, submit_time=T0 + timedelta(hours=hours), name=name,
                           node_search=node_search_text(nodes))


@pytest.fixture
def staff_api(api_client, make_user):
    api_client.force_authenticate(make_user("root", is_staff=True))
    return api_client


@pytest.mark.parametrize("query, expected", [
    ("user=alice", [2, 1]),
    ("account=a-moe02", [5, 4]),
    ("state=RUNNING&state=PENDING", [4, 3]),
    ("partition=debug", [2]),
    ("node=nid000002", [5, 1]),
    ("node=nid00000", []),  # whole hostnames only
    ("min_nodes=2", [3, 1]),
    ("max_nodes=1", [5, 2]),
    ("submitted_after=2026-11-20T14:00:00Z&submitted_before=2026-11-20T20:00:00Z", [4, 3, 2]),
    ("q=pretrain", [5, 1]),
    ("ordering=nodes", [5, 2, 1, 3, 4]),  # ties: newest job first; unknown sizes last
    ("ordering=-job", [5, 4, 3, 2, 1]),
])
def test_api_filters(jobs, staff_api, query, expected):
    body = staff_api.get(f"/api/v1/jobs/?{query}").json()
    assert [job["job_id"] for job in body["results"]] == expected


def test_bad_filter_values_are_400_with_the_field(jobs, staff_api):
    response = staff_api.get("/api/v1/jobs/?state=EXPLODED&min_nodes=many")
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {"state", "min_nodes"}


def test_list_page_defaults_to_my_jobs_and_keeps_filters_in_links(jobs, client, make_user):
    client.force_login(make_user("bob", accounts=["a-llm01"]))
    page = client.get("/jobs/").content.decode()
    assert 'href="/jobs/alps/3/"' in page and 'href="/jobs/alps/4/"' in page
    assert 'href="/jobs/alps/1/"' not in page  # alice's, though bob may see it under "my projects' jobs"
    page = client.get("/jobs/?scope=all&state=COMPLETED").content.decode()
    assert 'href="/jobs/alps/1/"' in page and 'href="/jobs/alps/5/"' not in page  # carol's account is not bob's
    assert "scope=all&amp;state=COMPLETED&amp;ordering=nodes" in page.replace("ordering=-nodes", "ordering=nodes")


def test_job_page_shows_placement_on_the_topology(jobs, client, make_user):
    from django.core.management import call_command

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    client.force_login(make_user("bob"))
    page = client.get("/jobs/alps/3/").content.decode()
    assert "Allocation on the network" in page and 'aria-label="Placement"' not in page
    assert "<th scope=\"row\">Nodes</th><td class=\"num\">128</td>" in page.replace("\n", "").replace("  ", "")
    assert 'data-live="true"' in page and "data-auto-refresh" not in page  # running: updates in place, no reloads
    figure = client.get("/jobs/alps/3/panels/allocation/map.json").json()  # the map loads after the first paint
    assert any((trace.get("name") or "").startswith("this job's nodes") for trace in figure["data"])
    pending = client.get("/jobs/alps/4/").content.decode()
    assert "the job has not started" in pending


def test_hostile_job_names_are_escaped(jobs, client, make_user):
    Job.objects.filter(job_id=1).update(name='<script>alert("x")</script>')
    client.force_login(make_user("alice"))
    page = client.get("/jobs/").content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;" in page
