"""The network API and panel: who may read a job's NICs, what the answer holds, the demo's degraded NIC."""
import re
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from apps.jobs.models import Cluster, Job
from apps.jobs.services import job_token_issue
from apps.network.synthetic import grid, nic_counters

HOSTS = [f"nid{n:06d}" for n in range(470, 478)]


@pytest.fixture
def job(db, store):
    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    cluster = Cluster.objects.create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=5, user_name="alice", account="a-llm01", state="COMPLETED",
                             node_list=HOSTS, node_count=len(HOSTS), gpus=4 * len(HOSTS), start_time=start,
                             end_time=start + timedelta(minutes=35))
    Job.objects.create(cluster=cluster, job_id=6, user_name="bob", account="a-bob", state="COMPLETED", node_list=HOSTS[:2],
                       node_count=2, gpus=8, start_time=start, end_time=start + timedelta(minutes=35))
    times = grid(start, job.end_time, 10)
    store.write_net(nic_counters(HOSTS, times, run_start=start - timedelta(hours=1), degraded=("nid000473", "hsn2")))
    return job


def test_other_users_get_404_and_the_jobs_token_reads(job, client, api_client, make_user):
    api_client.force_authenticate(make_user("mallory", accounts=["a-other"]))
    assert api_client.get("/api/v1/jobs/alps/5/network/").status_code == 404
    assert api_client.get("/api/v1/jobs/alps/5/network/heatmap/").status_code == 404
    token = job_token_issue(job, created_by="alice")
    response = client.get("/api/v1/jobs/alps/5/network/", HTTP_AUTHORIZATION=f"JobToken {token}")
    assert response.status_code == 200, response.content[:300]
    other = job_token_issue(Job.objects.get(job_id=6), created_by="bob")
    assert client.get("/api/v1/jobs/alps/5/network/", HTTP_AUTHORIZATION=f"JobToken {other}").status_code == 404


def test_the_answer_names_the_degraded_nic_with_rates_and_totals(job, api_client, make_user):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    body = api_client.get("/api/v1/jobs/alps/5/network/").json()
    assert body["reporting"] == body["expected"] == 32
    assert [(f["host"], f["nic"]) for f in body["findings"]] == [("nid000473", "hsn2")]
    assert body["findings"][0]["reason"].startswith("hsn2 on nid000473: 30 % of packets retried, its peers < 1 %")
    assert body["verdict"].startswith("hsn2 on nid000473 retries 30 % of its packets")
    assert [(n["host"], n["nic"]) for n in body["nics"]][:5] == [("nid000470", f"hsn{k}") for k in range(4)] + [("nid000471", "hsn0")]
    row = [n["host"] + n["nic"] for n in body["nics"]].index("nid000473hsn2")
    retry = pd.Series(body["series"]["retry_fraction"][row], dtype=float).dropna()
    assert len(retry) >= 20 and retry.median() == pytest.approx(0.30, abs=0.01)
    healthy = pd.Series(body["series"]["retry_fraction"][0], dtype=float).dropna()
    assert healthy.max() < 0.01
    tx = pd.Series(body["series"]["tx_bytes_s"][row], dtype=float).dropna()
    peers = pd.Series(body["series"]["tx_bytes_s"][0], dtype=float).dropna()
    assert tx.median() == pytest.approx(0.6 * peers.median(), rel=0.08)
    assert len(body["times"]) == len(body["series"]["tx_bytes_s"][0])
    assert "cannot" in body["groups_note"] or "not in the NIC counters" in body["groups_note"]
    light = api_client.get("/api/v1/jobs/alps/5/network/", {"series": "none"}).json()
    assert light["series"] == {} and light["findings"] == body["findings"]


@pytest.mark.parametrize("query, where", [({"series": "some"}, "series"), ({"start": "yesterday"}, "start"),
                                          ({"metric": "loss"}, "metric"), ({"bins": "0"}, "bins"), ({"sort": "score"}, "sort")])
def test_bad_parameters_are_400_naming_them(job, api_client, make_user, query, where):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    url = "/api/v1/jobs/alps/5/network/" + ("heatmap/" if where in ("metric", "bins", "sort") else "")
    response = api_client.get(url, query)
    assert response.status_code == 400
    assert where in response.content.decode()


def test_the_heatmap_rows_put_nic_k_where_gpu_k_is_and_the_outlier_stands_out(job, api_client, make_user):
    from apps.core.heatmaps import decode_u8
    from apps.saturation.models import JobSaturation

    # the scoring's GPU rows with a layout: rank order differs from node order
    per_gpu = [{"host": h, "gpu": g, "rank": (7 - i) * 4 + g, "pp": (7 - i) // 4, "dp": 0, "tp": g}
               for i, h in enumerate(HOSTS) for g in range(4)]
    JobSaturation.objects.create(job=job, status="ready", per_gpu=per_gpu)
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    body = api_client.get("/api/v1/jobs/alps/5/network/heatmap/", {"metric": "retries", "sort": "rank", "bins": "30"}).json()
    labels = [row["label"] for row in body["rows"]]
    assert labels[:5] == ["r0 nid000477 hsn0", "r1 nid000477 hsn1", "r2 nid000477 hsn2", "r3 nid000477 hsn3", "r4 nid000476 hsn0"]
    assert body["scale"]["zmin"] == 0 and body["scale"]["zmax"] == 100 and body["scale"]["bad"] == "high"
    z = decode_u8(body["z"], (len(body["rows"]), len(body["times"])), body["scale"]["zmin"], body["scale"]["zmax"])
    worst = labels.index("r18 nid000473 hsn2")
    medians = pd.DataFrame(z.T).median()
    assert medians.idxmax() == worst and medians[worst] == pytest.approx(30, abs=1.5)
    assert medians.drop(worst).max() < 1.5
    stage = api_client.get("/api/v1/jobs/alps/5/network/heatmap/", {"sort": "pp"}).json()
    assert [s["label"] for s in stage["separators"]] == ["stage 0", "stage 1"]


def test_a_job_without_nic_counters_says_how_to_get_them(db, store, client, make_user):
    start = timezone.now() - timedelta(minutes=30)
    Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=9, user_name="alice", account="a-llm01",
                       state="RUNNING", node_list=HOSTS[:2], node_count=2, gpus=8, start_time=start)
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    body = client.get("/api/v1/jobs/alps/9/network/").json()
    assert body["reporting"] == 0 and body["findings"] == [] and "Cassini reader" in body["how_to"]
    page = client.get("/jobs/alps/9/").content.decode()
    assert 'id="network-reason"' in page and "Cassini reader" in page


def test_the_panel_and_first_screen_name_the_nic(job, client, make_user):
    from apps.network.panel import summary

    part = summary(job)
    assert [f.title for f in part.findings] == [
        "hsn2 on nid000473: 30 % of packets retried, its peers < 1 %."]
    assert part.findings[0].level == "warning" and "nid000473" in part.findings[0].action
    assert part.facts[0].value == "1 stand out"
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/jobs/alps/5/").content.decode()
    assert "hsn2 on nid000473 retries 30 % of its packets — its node&#x27;s GPUs keep pace so far." in page
    assert 'data-heatmap-url="/api/v1/jobs/alps/5/network/heatmap/"' in page
    # the colour that shows the NIC comes first (retries on 0-100 %), and its counters read at a glance
    assert re.search(r'<select id="nmetric"[^>]*><option value="retries">', page)
    assert re.search(r"— [\d.]+ (million|billion) retries of [\d.]+ (million|billion) packets sent", page)
