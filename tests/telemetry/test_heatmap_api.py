"""GET /api/v1/jobs/<cluster>/<job_id>/telemetry/heatmap/ (any DCGM field, compact) and .../telemetry/nodes/ (node ×
field min/mean/max) through the real API, from the job cube the refresh task builds out of the store."""
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.core.heatmaps import decode_u8
from apps.telemetry.services import job_telemetry_refresh
from apps.telemetry.synthetic_jobs import default_planted, job_chunks
from tests.security.test_openapi_complete import assert_documented

HOSTS = [f"nid{n:06d}" for n in range(1, 9)]
URL = "/api/v1/jobs/alps/41/telemetry/heatmap/"
NODES_URL = "/api/v1/jobs/alps/41/telemetry/nodes/"


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=60)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=41, user_name="alice", account="a-llm01",
                              state="RUNNING", submit_time=start - timedelta(minutes=3), start_time=start, node_list=HOSTS)


@pytest.fixture
def materialised(job, store):
    """The demo's Megatron trace (throttled GPU, hot GPU, slow-NIC node) after an hour of warm-up, bucketed."""
    for chunk in job_chunks("megatron", HOSTS, job.start_time, 3500, seed=8, elapsed_before_s=3600):
        store.write(chunk)
    record = job_telemetry_refresh(job)
    assert record.status == "ready"
    return record


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def cells(body: dict, key: str = "z") -> np.ndarray:
    return decode_u8(body[key], (len(body["rows"]), len(body["times"])), body["scale"]["zmin"], body["scale"]["zmax"])


def row_medians(body: dict) -> np.ndarray:
    scale = body["scale"]
    return np.nanmedian((cells(body) - scale["zmin"]) / (scale["zmax"] - scale["zmin"]), axis=1)


def row_of(body: dict, host: str, gpu: int) -> int:
    return next(i for i, row in enumerate(body["rows"]) if (row["host"], row["gpu"]) == (host, gpu))


def test_urls_keep_their_names():
    assert reverse("telemetry-api:job-heatmap", args=["alps", 41]) == URL
    assert reverse("telemetry-api:job-nodes", args=["alps", 41]) == NODES_URL
    assert reverse("telemetry-api:samples") == "/api/v1/telemetry/samples/"


def test_fields_on_physical_ranges_show_the_hot_and_the_throttled_gpu(materialised, alice):
    planted = default_planted(HOSTS)
    hot = alice.get(URL, {"field": "150"}).json()
    assert_documented("telemetry.TelemetryHeatmapResponse", hot)
    assert (hot["metric"], hot["title"], hot["unit"], hot["encoding"], hot["sort"]) == (150, "DCGM_FI_DEV_GPU_TEMP", "°C", "u8", "node")
    assert (hot["scale"]["zmin"], hot["scale"]["zmax"], hot["scale"]["bad"]) == (30.0, 87.0, "high")
    medians = row_medians(hot)
    assert medians[row_of(hot, *planted.hot)] >= 0.9 and np.all(np.delete(medians, row_of(hot, *planted.hot)) < 0.9)
    assert hot["rows"][0] == {"label": f"{HOSTS[0]}:0", "host": HOSTS[0], "gpu": 0, "rank": None, "pp": None, "dp": None,
                              "tp": None, "group": None, "switch": None, "members": 1}
    clock = alice.get(URL, {"field": "DCGM_FI_DEV_SM_CLOCK"}).json()
    assert clock["metric"] == 100 and clock["scale"]["zmin"] == 1590.0 and "DCGM field 113" in clock["scale"]["source"]
    medians = row_medians(clock)
    slow = row_of(clock, *planted.throttled)
    assert medians[slow] <= 0.1 and np.all(np.delete(medians, slow) > 0.5)
    default = alice.get(URL).json()
    assert default["metric"] == 1002 and default["scale"]["kind"] == "fraction" and default["unit"] == ""
    assert default["steady_start"] is None and default["shading"] == [] and default["peers"] is None
    assert default["coverage"]["first"] == default["times"][0]


def test_deviation_compares_with_every_gpu_of_the_job(materialised, alice):
    planted = default_planted(HOSTS)
    body = alice.get(URL, {"field": "SMCLK", "mode": "deviation"}).json()
    assert_documented("telemetry.TelemetryHeatmapResponse", body)
    assert body["peers"] == "all 32 GPUs of the job (telemetry knows no ranks)" and body["scale"]["kind"] == "deviation"
    medians = row_medians(body)
    slow = row_of(body, *planted.throttled)
    assert medians[slow] < 0.1 and np.all(np.abs(np.delete(medians, slow) - 0.5) < 0.1)


def test_a_window_and_rows(materialised, alice):
    whole = alice.get(URL, {"field": "155", "bins": "12"}).json()
    assert alice.get(URL, {"field": "155", "bins": "12", "start": "", "end": " "}).json() == whole  # empty: no window
    assert len(whole["times"]) <= 12
    start, end = whole["times"][3], whole["times"][5]
    zoom = alice.get(URL, {"field": "155", "bins": "12", "start": start, "end": end, "rows": "gpu"}).json()
    assert zoom["bin_seconds"] < whole["bin_seconds"] and zoom["times"][0] == start and zoom["times"][-1] < end
    assert zoom["window"] == {"start": start, "end": end} and len(zoom["rows"]) == 32


@pytest.mark.parametrize("query, fields", [
    ({"field": "nope"}, {"field"}),
    ({"field": "160"}, {"field"}),  # a DCGM field this job's telemetry does not have
    ({"bins": "0", "mode": "z", "rows": "x"}, {"bins", "mode", "rows"}),
    ({"start": "2026-13-01", "end": "later"}, {"start", "end"}),
])
def test_bad_parameters_are_400s_naming_them(materialised, alice, query, fields):
    response = alice.get(URL, query)
    assert response.status_code == 400 and {e["field"] for e in response.json()["errors"]} == fields, response.json()


def test_access_is_the_jobs_and_a_job_without_telemetry_says_so(job, store, api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    missing = api_client.get(URL)
    assert missing.status_code == 404 and "no telemetry for this job" in missing.json()["detail"]
    store.write(next(job_chunks("megatron", HOSTS, job.start_time, 600, seed=1)))
    job_telemetry_refresh(job)
    assert api_client.get(URL).status_code == 200
    api_client.force_authenticate(make_user("bob"))
    forbidden, absent = api_client.get(URL), api_client.get("/api/v1/jobs/alps/999/telemetry/heatmap/")
    assert forbidden.status_code == absent.status_code == 404 and forbidden.json() == absent.json()
    assert api_client.get(NODES_URL).status_code == 404
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))
    first = api_client.get(URL, {"field": "155"})
    assert first.status_code == 200 and api_client.get(URL, {"field": "155"}, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    api_client.force_authenticate(None)
    assert api_client.get(URL).status_code in (401, 403)


def test_node_table(materialised, alice):
    planted = default_planted(HOSTS)
    body = alice.get(NODES_URL, {"fields": "100,DCGM_FI_DEV_GPU_TEMP,1002"}).json()
    assert_documented("telemetry.TelemetryNodesResponse", body)
    assert body["fields"] == [{"id": 100, "name": "DCGM_FI_DEV_SM_CLOCK", "unit": "MHz"},
                              {"id": 150, "name": "DCGM_FI_DEV_GPU_TEMP", "unit": "°C"},
                              {"id": 1002, "name": "DCGM_FI_PROF_SM_ACTIVE", "unit": "ratio"}]
    nodes = {node["host"]: node for node in body["nodes"]}
    assert list(nodes) == HOSTS and all(node["gpus"] == 4 for node in nodes.values())
    clock_min = {host: node["stats"]["100"]["min"] for host, node in nodes.items()}
    assert min(clock_min, key=clock_min.get) == planted.throttled[0] and clock_min[planted.throttled[0]] < 1450
    temp_max = {host: node["stats"]["150"]["max"] for host, node in nodes.items()}
    assert max(temp_max, key=temp_max.get) == planted.hot[0] and temp_max[planted.hot[0]] > 80
    stats = nodes[HOSTS[0]]["stats"]["1002"]
    assert 0 <= stats["min"] <= stats["mean"] <= stats["max"] <= 1
    every = alice.get(NODES_URL).json()
    assert [f["id"] for f in every["fields"]] == materialised.fields
    bad = alice.get(NODES_URL, {"fields": "100,nope,160"})
    assert bad.status_code == 400 and {e["field"] for e in bad.json()["errors"]} == {"fields"}
    assert alice.get(NODES_URL, {"fields": "160"}).status_code == 400


def test_a_4096_gpu_cube_aggregates_by_node_keeping_the_minimum(db, alice):
    """The bench job's size (1,024 nodes × 4 GPUs) as a cube written directly: one field, 240 buckets."""
    from apps.jobs.models import Cluster, Job
    from apps.telemetry.models import JobTelemetry
    from apps.telemetry.products import JobCube

    hosts = [f"nid{n:06d}" for n in range(1, 1025)]
    start = timezone.now().replace(microsecond=0) - timedelta(hours=4)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4096, user_name="alice", account="a-llm01",
                             state="COMPLETED", submit_time=start, start_time=start, end_time=start + timedelta(hours=4),
                             node_list=hosts)
    gpus, buckets = 4096, 240
    rng = np.random.default_rng(5)
    mean = (1930 + rng.normal(0, 4, (gpus, 1, buckets))).astype("float32")
    low, high = mean - 10, mean + 10
    low[777, 0, 50] = 1200  # one dip that the bucket mean hides
    cube = JobCube(hosts=np.repeat(np.array(hosts, dtype=object), 4), gpus=np.tile(np.arange(4, dtype="int16"), 1024),
                   fields=np.array([100], dtype="int32"),
                   buckets=np.datetime64(start.replace(tzinfo=None), "ns") + np.arange(buckets) * np.timedelta64(60, "s"),
                   step=60, count=np.full((gpus, 1, buckets), 6, dtype="int32"), mean=mean, min=low, max=high)
    path = Path(settings.DATA_DIR) / "telemetry-products" / "alps" / "4096.test.npz"
    cube.save(path)
    JobTelemetry.objects.create(job=job, status="ready", product=str(path.relative_to(settings.DATA_DIR)), gpus=gpus, fields=[100],
                                step_seconds=60, materialized=timezone.now())
    response = alice.get("/api/v1/jobs/alps/4096/telemetry/heatmap/", {"field": "100"})
    body = json.loads(response.content)
    assert len(response.content) < 1_000_000, len(response.content)
    assert body["aggregated_by"] == "node" and len(body["rows"]) == 1024 and body["rows"][194]["label"] == f"{hosts[194]} (4 GPUs)"
    z, means = cells(body), cells(body, "mean")
    assert z[194, 50] == 1590.0 and np.all(np.delete(z[:, 50], 194) > 1850)  # the member's minimum, clipped to the base clock
    assert abs(means[194, 50] - mean[776:780, 0, 50].mean()) < 2
