"""A node's own history (issue 39, acceptance 3): GET /api/v1/nodes/<host>/history/ and the page /nodes/<host>/ on a small
world — a GH200 node that ran the owner's job and another project's job, with GPU, NIC and host samples, vetting results
and a health change. Staff and people who may see a job that ran there see it; others' job names never reach them."""
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from apps.jobs.models import Cluster, Job, JobToken, node_search_text

pytestmark = pytest.mark.django_db
HOST = "nid001234"
SECRET = "zzsecret-other-project-job"
GB = 1e9


@pytest.fixture
def world(db, make_user, store):
    return build_node_world(make_user, store)


def build_node_world(make_user, store) -> dict:
    """Four people, two jobs on nid001234 (the owner's 30 h ago, another project's 12 h ago), 30 h of GPU, host and NIC
    samples, a failed vetting result and a health change."""
    from apps.vetting.models import NodeHealth, NodeHealthEvent, VettingResult, VettingRun

    now = timezone.now().replace(microsecond=0)
    users = {"owner": make_user("olive", accounts=["a-llm01"]), "member": make_user("mia", accounts=["a-llm01"]),
             "other": make_user("oscar", accounts=["a-moe02"]), "staff": make_user("sam", is_staff=True)}
    cluster = Cluster.objects.create(name="alps")
    nodes = [HOST, "nid001235"]

    def job(job_id, name, user, account, hours_ago, hours):
        start = now - timedelta(hours=hours_ago)
        return Job.objects.create(cluster=cluster, job_id=job_id, name=name, user_name=user, account=account,
                                  state="COMPLETED", submit_time=start, start_time=start, end_time=start + timedelta(hours=hours),
                                  nodes="nid[001234-001235]", node_list=nodes, node_count=2, node_search=node_search_text(nodes))

    own = job(4242, "olive-pretrain", "olive", "a-llm01", 30, 6)
    job(4343, SECRET, "oscar", "a-moe02", 12, 4)
    times = pd.date_range(now - timedelta(hours=30), now, freq="10min", tz="UTC")
    store.write(pd.DataFrame({"ts": list(times) * 4, "cluster": "alps", "host": HOST,
                              "gpu": [g for g in range(4) for _ in times], "uuid": "", "field": 1002, "value": 0.6}))
    host_rows = []
    for ts in times:
        host_rows += [(ts, "node", "host_cpu_busy", 0.5), (ts, "node", "host_mem_used", 120e9),
                      (ts, "node", "host_mem_total", 480e9), (ts, "gpu1", "host_gpu_page_cache", 23 * GB)]
    store.write_host(pd.DataFrame([{"ts": t, "cluster": "alps", "host": HOST, "domain": d, "field": f, "value": v}
                                   for t, d, f, v in host_rows]))
    store.write_net(pd.DataFrame({"ts": times, "cluster": "alps", "host": HOST, "nic": "hsn0", "field": "nic_tx_bytes",
                                  "value": [i * 600e9 for i in range(len(times))]}))
    run = VettingRun.objects.create(cluster=cluster, source="vetnode", started=now - timedelta(hours=20))
    VettingResult.objects.create(run=run, time=now - timedelta(hours=20), host=HOST, kind="vetnode", eval_name="nccl-allreduce",
                                 status="FAILED", outcome="fail", job_id_number=4343, user_name="oscar", account="a-moe02")
    NodeHealthEvent.objects.create(host=HOST, from_state="healthy", to_state="suspect", action="rule", actor="rule:x v1",
                                   reason="2 failures in 7 days")
    NodeHealth.objects.create(host=HOST, state="suspect", reason="2 failures in 7 days", since=now - timedelta(hours=1))
    return {"users": users, "own": own}


def get(api_client, user, query="", host=HOST):
    api_client.force_authenticate(user)
    return api_client.get(f"/api/v1/nodes/{host}/history/{query}")


def test_the_owner_sees_the_nodes_history_with_others_jobs_unnamed(api_client, world):
    response = get(api_client, world["users"]["owner"])
    assert response.status_code == 200, response.content
    body = response.json()
    assert SECRET not in response.content.decode() and "4343" not in response.content.decode()
    assert [job["label"] for job in body["jobs"]] == ["olive-pretrain (alps/4242)", "another project's job"]
    assert body["jobs"][0]["url"] == "/jobs/alps/4242/" and body["jobs"][1]["url"] is None
    assert body["step"] == 1800 and len(body["times"]) in (336, 337)  # 7 days of half hours
    assert set(body["gpus"]) == {"0", "1", "2", "3"} and 0.6 in body["gpus"]["1"]
    assert max(v for v in body["gpu_page_cache"]["1"] if v is not None) == 23 * GB
    assert 0.5 in body["host_metrics"]["cpu_busy"] and 0.25 in body["host_metrics"]["mem_used"]
    assert 1e9 in body["nics"]["hsn0"]  # 600 GB per 10 min: 1 GB/s
    assert [(v["eval_name"], v["outcome"]) for v in body["vetting"]] == [("nccl-allreduce", "fail")]
    assert body["health"][0]["to_state"] == "suspect" and body["state"] == "suspect"


def test_who_may_see_a_node_follows_the_jobs_rules(api_client, world):
    users = world["users"]
    assert get(api_client, users["member"]).status_code == 200  # a member of the job's project
    assert get(api_client, users["staff"]).status_code == 200
    mirrored = get(api_client, users["other"])  # oscar's own job ran there too: he sees it named, olive's not
    assert mirrored.status_code == 200 and "olive-pretrain" not in mirrored.content.decode()
    assert [job["label"] for job in mirrored.json()["jobs"]] == ["another project's job", f"{SECRET} (alps/4343)"]
    stranger = get(api_client, users["owner"], host="nid009999")
    assert stranger.status_code == 404
    assert get(api_client, users["staff"], host="nid009999").status_code == 404  # unknown to the portal
    api_client.force_authenticate(None)
    _, key = JobToken.issue(world["own"])
    token = api_client.get(f"/api/v1/nodes/{HOST}/history/", HTTP_AUTHORIZATION=f"JobToken {key}")
    assert token.status_code in (401, 403, 404)


def test_a_user_without_a_job_on_the_node_gets_the_404_of_a_missing_node(api_client, world, make_user):
    nobody = make_user("nora", accounts=["a-other"])
    assert get(api_client, nobody).status_code == 404
    assert get(api_client, nobody).json()["detail"] == get(api_client, nobody, host="nid009999").json()["detail"]


@pytest.mark.parametrize("query, field, words", [
    ("?since=yesterday", "since", "is not an ISO 8601 time"),
    ("?since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z", "since", "at most 31 days"),
    ("?since=2026-03-01T00:00:00Z&until=2026-01-01T00:00:00Z", "until", "must be after since"),
    ("?until=3000-01-01T00:00:00Z", "until", "between 2000 and 2200"),
])
def test_a_bad_window_is_a_400_naming_the_parameter(api_client, world, query, field, words):
    response = get(api_client, world["users"]["owner"], query)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field and words in response.json()["detail"]


def test_the_page_draws_the_history_and_names_only_visible_jobs(client, world):
    client.force_login(world["users"]["owner"])
    page = client.get(f"/nodes/{HOST}/?days=3")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="node-history"' in html and "olive-pretrain" in html and SECRET not in html
    assert "another project&#x27;s job" in html or "another project's job" in html
    client.force_login(world["users"]["staff"])
    assert SECRET in client.get(f"/nodes/{HOST}/").content.decode()
    assert client.get(f"/nodes/{HOST}/?days=99").status_code == 200  # said on the page, the default window shown
    client.force_login(world["users"]["other"])
    assert client.get("/nodes/nid009999/").status_code == 404


def test_the_system_page_leads_to_a_nodes_history(client, world):
    client.force_login(world["users"]["owner"])
    assert 'id="node-lookup"' in client.get("/system/").content.decode()
    assert client.get("/nodes/?host=nid001234").url == f"/nodes/{HOST}/"
    assert client.get("/nodes/?host=../etc").url == "/system/"
