"""The saturation heatmap's compact answer (``encoding=u8``) through the real API: physical colour ranges that put
the planted hot GPU at the top and the throttled one at the bottom, deviation from the straggler detector's peers,
labels and separators, windows, aggregation of a 4,096-GPU job into a small answer, 400s naming the parameter."""
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.utils import timezone

from apps.core.heatmaps import decode_u8
from apps.saturation.services import job_saturation_refresh
from apps.telemetry.synthetic_jobs import default_planted
from tests.security.test_openapi_complete import assert_documented

NODES = [f"nid{n:06d}" for n in range(1, 33)]
URL = "/api/v1/jobs/alps/31/saturation/heatmap/"


@pytest.fixture
def scored(megatron_job):
    """A running 128-GPU Megatron job (tp 4, pp 2, dp 16) on the reference topology, with its warm-up, scored."""
    from django.core.management import call_command

    from apps.ranks.models import JobLayout

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    job = megatron_job(job_id=31, hosts=NODES, minutes=60, seconds=3500, seed=8)
    JobLayout.objects.create(job=job, tp=4, pp=2, dp=16, world_size=128, tasks_per_node=4, source="sizes")
    record = job_saturation_refresh(job)
    assert record.status == "ready"
    return record


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def cells(body: dict, key: str = "z") -> np.ndarray:
    return decode_u8(body[key], (len(body["rows"]), len(body["times"])), body["scale"]["zmin"], body["scale"]["zmax"])


def positions(body: dict) -> np.ndarray:
    """Where each cell lands on the colour scale, 0..1."""
    scale = body["scale"]
    return (cells(body) - scale["zmin"]) / (scale["zmax"] - scale["zmin"])


def steady(body: dict) -> np.ndarray:
    """Columns from the steady state on."""
    return np.array([t >= body["steady_start"] for t in body["times"]])


def row_of(body: dict, host: str, gpu: int) -> int:
    return next(i for i, row in enumerate(body["rows"]) if (row["host"], row["gpu"]) == (host, gpu))


def test_without_new_parameters_the_answer_is_the_json_one(scored, alice):
    legacy = alice.get(URL, {"metric": "temperature", "bins": "30", "sort": "rank"}).json()
    assert set(legacy) == {"metric", "title", "unit", "scale", "sort", "bin_seconds", "times", "steady_start", "rows", "values"}
    assert legacy["scale"] == 0.1 and len(legacy["values"]) == 128 and "score" in legacy["rows"][0]
    assert alice.get(URL, {"metric": "temperature", "bins": "30", "sort": "rank", "encoding": "json"}).json() == legacy
    assert_documented("saturation.HeatmapResponse", legacy)


def test_physical_ranges_show_the_hot_and_the_throttled_gpu(scored, alice):
    planted = default_planted(NODES)
    hot = alice.get(URL, {"metric": "temperature", "encoding": "u8"}).json()
    assert_documented("saturation.HeatmapResponse", hot)
    assert (hot["encoding"], hot["mode"], hot["unit"], hot["aggregated_by"], hot["mean"]) == ("u8", "value", "°C", None, None)
    assert hot["scale"] | {"source": None} == {"zmin": 30.0, "zmax": 87.0, "kind": "physical", "source": None, "bad": "high",
                                               "colorscale": "Viridis"}
    assert "GH200" in hot["scale"]["source"] and "87 °C" in hot["scale"]["source"]
    where = positions(hot)[:, steady(hot)]
    medians = np.nanmedian(where, axis=1)
    hot_row = row_of(hot, *planted.hot)
    assert medians[hot_row] >= 0.9 and np.all(np.delete(medians, hot_row) < 0.9)
    clock = alice.get(URL, {"metric": "sm_clock", "encoding": "u8"}).json()
    assert (clock["scale"]["zmin"], clock["scale"]["zmax"], clock["scale"]["bad"]) == (1590.0, 1980.0, "low")
    medians = np.nanmedian(positions(clock)[:, steady(clock)], axis=1)
    slow = row_of(clock, *planted.throttled)
    assert medians[slow] <= 0.1 and np.all(np.delete(medians, slow) > 0.5)
    fraction = alice.get(URL, {"metric": "S", "encoding": "u8"}).json()
    assert (fraction["scale"]["zmin"], fraction["scale"]["zmax"], fraction["scale"]["kind"]) == (0.0, 1.0, "fraction")


def test_rows_are_labelled_and_separated_by_stage_and_group(scored, alice):
    by_stage = alice.get(URL, {"metric": "S", "sort": "pp", "encoding": "u8"}).json()
    first = by_stage["rows"][0]
    assert first["label"] == f"r0 {NODES[0]}:0" and first["members"] == 1 and first["pp"] == 0
    assert all(row["label"] == f"r{row['rank']} {row['host']}:{row['gpu']}" for row in by_stage["rows"])
    assert by_stage["separators"] == [{"row": 0, "label": "stage 0"}, {"row": 64, "label": "stage 1"}]
    by_group = alice.get(URL, {"metric": "S", "sort": "group", "encoding": "u8"}).json()
    marks = by_group["separators"]
    groups = [row["group"] for row in by_group["rows"]]
    assert [mark["row"] for mark in marks] == [0] + [i for i in range(1, 128) if groups[i] != groups[i - 1]]
    assert all(mark["label"] == f"group {groups[mark['row']]}" for mark in marks)
    assert alice.get(URL, {"metric": "S", "sort": "rank", "encoding": "u8"}).json()["separators"] == []


def test_deviation_from_the_straggler_detectors_peers(scored, alice):
    planted = default_planted(NODES)
    body = alice.get(URL, {"metric": "sm_clock", "mode": "deviation"}).json()  # mode alone asks for the compact answer
    assert_documented("saturation.HeatmapResponse", body)
    assert body["encoding"] == "u8" and body["scale"]["kind"] == "deviation" and body["scale"]["zmin"] == -body["scale"]["zmax"]
    assert "pipeline stage and tensor lane" in body["peers"] and isinstance(body["scale"]["colorscale"], list)
    medians = np.nanmedian(positions(body)[:, steady(body)], axis=1)
    slow = row_of(body, *planted.throttled)
    assert medians[slow] < 0.1 and np.all(np.abs(np.delete(medians, slow) - 0.5) < 0.1)
    hot = alice.get(URL, {"metric": "temperature", "mode": "deviation"}).json()
    medians = np.nanmedian(positions(hot)[:, steady(hot)], axis=1)
    assert medians[row_of(hot, *planted.hot)] > 0.9
    assert alice.get(URL, {"metric": "sm_clock", "encoding": "u8"}).json()["peers"] is None


def test_a_window_gets_finer_bins_and_the_truth_about_coverage_and_warmup(scored, alice):
    whole = alice.get(URL, {"metric": "S", "bins": "20", "encoding": "u8"}).json()
    assert len(whole["times"]) <= 20 and whole["coverage"]["first"] == whole["times"][0]
    assert whole["shading"] == [{"start": whole["coverage"]["first"], "end": whole["steady_start"], "label": "warm-up"}]
    start, end = whole["times"][5], whole["times"][7]
    zoom = alice.get(URL, {"metric": "S", "bins": "20", "start": start, "end": end}).json()
    assert zoom["window"] == {"start": start, "end": end} and zoom["bin_seconds"] < whole["bin_seconds"]
    assert zoom["times"][0] >= start and zoom["times"][-1] < end and zoom["coverage"] == whole["coverage"]
    assert zoom["shading"] == []  # zoomed past the warm-up
    naive = alice.get(URL, {"metric": "S", "bins": "20", "start": start.replace("T", " ").rstrip("Z"), "end": end}).json()
    assert naive["times"] == zoom["times"]  # Plotly's axis strings carry no zone: UTC


@pytest.mark.parametrize("query, fields", [
    ({"mode": "x"}, {"mode"}),
    ({"rows": "all"}, {"rows"}),
    ({"encoding": "zip"}, {"encoding"}),
    ({"encoding": "json", "mode": "deviation", "rows": "gpu"}, {"mode", "rows"}),
    ({"start": "yesterday"}, {"start"}),
    ({"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T09:00:00Z"}, {"end"}),
    ({"bins": "0", "metric": "nope", "end": "x"}, {"bins", "metric", "end"}),
    ({"start": "9999-12-31T23:59:59-14:00", "end": "0001-01-01T00:00:00+14:00"}, {"start", "end"}),
])
def test_bad_parameters_are_400s_naming_them(megatron_job, alice, query, fields):
    from apps.saturation.models import JobSaturation

    # Parameters are read after the access check and before the product: a ready row is enough.
    JobSaturation.objects.create(job=megatron_job(job_id=31, hosts=NODES[:1], minutes=5, seconds=0, seed=1), status="ready",
                                 computed=timezone.now())
    response = alice.get(URL, query)
    assert response.status_code == 400 and {e["field"] for e in response.json()["errors"]} == fields, response.json()


def test_others_see_nothing_and_answers_are_conditional(scored, api_client, make_user):
    api_client.force_authenticate(make_user("bob"))
    assert api_client.get(URL, {"encoding": "u8"}).status_code == 404
    assert (api_client.get(URL, {"encoding": "u8"}).json() == api_client.get("/api/v1/jobs/alps/99/saturation/heatmap/",
                                                                              {"encoding": "u8"}).json())
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))
    first = api_client.get(URL, {"encoding": "u8", "mode": "deviation"})
    assert first.status_code == 200 and first["ETag"]
    assert api_client.get(URL, {"encoding": "u8", "mode": "deviation"}, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304


def test_a_4096_gpu_job_answers_with_1024_node_rows_that_keep_the_outlier(db, alice):
    """The bench's 4,096-GPU job (1,024 GH200 nodes, tp 4, pp 8) as a product written directly, without scoring."""
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation
    from apps.saturation.products import SaturationCube

    hosts = [f"nid{n:06d}" for n in range(1, 1025)]
    start = timezone.now().replace(microsecond=0) - timedelta(hours=3)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4096, user_name="alice", account="a-llm01",
                             state="COMPLETED", submit_time=start, start_time=start, end_time=start + timedelta(hours=3),
                             node_list=hosts)
    gpus, bins = 4096, 300
    rng = np.random.default_rng(4)
    clock = (1930 + rng.normal(0, 5, (gpus, bins))).astype("float32")
    clock[2050, 100:] = 1390  # one throttled GPU
    starts = np.datetime64(start.replace(tzinfo=None), "ns") + np.arange(bins) * np.timedelta64(36, "s")
    cube = SaturationCube(hosts=np.repeat(np.array(hosts, dtype=object), 4), gpus=np.tile(np.arange(4), 1024), bin_starts=starts,
                          bin_seconds=36.0, values={"sm_clock": clock}, warmup_end=None, steady_end=None)
    path = Path(settings.DATA_DIR) / "saturation-products" / "alps" / "4096.test.npz"
    cube.save(path)
    per_gpu = [{"host": hosts[i // 4], "gpu": i % 4, "rank": i, "tp": i % 4, "pp": (i // 4) % 8, "dp": i // 32,
                "group": i // 512, "switch": f"{i // 512}.{(i // 64) % 8}", "score": 60.0} for i in range(gpus)]
    JobSaturation.objects.create(job=job, status="ready", score=60.0, computed=timezone.now(), per_gpu=per_gpu, gpu_model="GH200",
                                 product=str(path.relative_to(settings.DATA_DIR)))
    url = "/api/v1/jobs/alps/4096/saturation/heatmap/"
    response = alice.get(url, {"metric": "sm_clock", "sort": "pp", "bins": "300", "encoding": "u8"})
    body = json.loads(response.content)
    assert len(response.content) < 1_100_000, len(response.content)  # the json answer: about 4.9 MB
    assert body["aggregated_by"] == "node" and len(body["rows"]) == 1024 and body["mean"] is not None
    node = next(i for i, row in enumerate(body["rows"]) if row["host"] == hosts[2050 // 4])
    assert body["rows"][node]["label"] == f"{hosts[2050 // 4]} (4 GPUs)" and body["rows"][node]["members"] == 4
    assert np.all(cells(body)[node, 100:] == 1590.0)  # the throttled member, clipped to the bottom of the range
    assert np.all(cells(body, "mean")[node, 100:] > 1750) and np.all(np.delete(cells(body), node, axis=0) > 1850)
    assert [s["label"] for s in body["separators"]] == [f"stage {s}" for s in range(8)]
    every = json.loads(alice.get(url, {"metric": "sm_clock", "bins": "300", "rows": "gpu"}).content)
    assert len(every["rows"]) == 4096 and every["aggregated_by"] is None


def test_a_new_scoring_is_served_at_once_though_the_row_parts_are_kept_per_process(scored, alice):
    """The compact answer keeps each scoring's per-GPU rows in memory; a newer scoring (new computed time and
    product) must never be answered with the previous one's rows."""
    from apps.saturation.models import JobSaturation

    before = alice.get(URL, {"metric": "S", "encoding": "u8", "sort": "rank"}).json()
    record = JobSaturation.objects.get(pk=scored.pk)
    record.per_gpu = [{**gpu, "host": f"renamed-{gpu['host']}"} for gpu in record.per_gpu]
    record.computed = record.computed + timedelta(seconds=1)
    record.save()
    after = alice.get(URL, {"metric": "S", "encoding": "u8", "sort": "rank"}).json()
    hosts_before = [row["host"] for row in before["rows"]]
    assert set(hosts_before) == set(NODES)
    assert [row["host"] for row in after["rows"]] == [f"renamed-{host}" for host in hosts_before]
