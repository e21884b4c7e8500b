"""Scoring a job end to end (store -> task -> record -> API), and who may read it."""
import re
import io
from datetime import timedelta
from pathlib import Path

import numpy as np

import pandas as pd
import pytest
from django.conf import settings
from django.utils import timezone

from apps.saturation.models import JobSaturation
from apps.saturation.services import job_saturation_refresh
from apps.telemetry.synthetic_jobs import default_planted, job_chunks

HOSTS = [f"nid{n:06d}" for n in range(1, 9)]


@pytest.fixture
def scored_job(megatron_job):
    return megatron_job(job_id=12, hosts=HOSTS, minutes=60, seconds=3500, seed=5)


def test_refresh_scores_the_job_and_the_api_serves_it(scored_job, api_client, make_user):
    record = job_saturation_refresh(scored_job)
    assert record.status == "ready" and record.limiter == "tensor" and 50 <= record.score <= 80
    assert len(record.per_gpu) == 32 and {"host", "gpu", "rank", "score", "compute", "memory", "link", "limiter", "busy",
                                          "label"} <= set(record.per_gpu[0])
    api_client.force_authenticate(make_user("alice"))
    body = api_client.get("/api/v1/jobs/alps/12/saturation/").json()
    assert body["job_score"] == record.score and body["limiter"] == "tensor"
    assert set(body["components"]) == {"compute", "memory", "link"} and len(body["per_gpu"]) == 32
    heat = api_client.get("/api/v1/jobs/alps/12/saturation/heatmap/", {"metric": "clock_factor", "bins": "20", "sort": "score"}).json()
    assert len(heat["rows"]) == 32 and len(heat["times"]) <= 20 and all(len(row) == len(heat["times"]) for row in heat["values"])
    scores = [row["score"] for row in heat["rows"]]
    assert scores == sorted(scores)
    host, gpu = default_planted(HOSTS).throttled
    clock_by_gpu = {(r["host"], r["gpu"]): pd.Series(v, dtype=float).median() for r, v in zip(heat["rows"], heat["values"])}
    assert min(clock_by_gpu, key=clock_by_gpu.get) == (host, gpu)  # the throttled GPU has the lowest clock
    bad = api_client.get("/api/v1/jobs/alps/12/saturation/heatmap/", {"metric": "nope", "bins": "0", "sort": "x"})
    assert bad.status_code == 400 and {e["field"] for e in bad.json()["errors"]} == {"metric", "bins", "sort"}
    assert isinstance(api_client.get("/api/v1/jobs/alps/12/stragglers/").json(), list)


def test_who_may_read_and_what_an_unscored_job_says(scored_job, api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    response = api_client.get("/api/v1/jobs/alps/12/saturation/")
    assert response.status_code == 404 and "not scored yet" in response.json()["detail"]
    job_saturation_refresh(scored_job)
    api_client.force_authenticate(make_user("bob"))
    assert api_client.get("/api/v1/jobs/alps/12/saturation/").status_code == 404
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))
    assert api_client.get("/api/v1/jobs/alps/12/saturation/").status_code == 200
    api_client.force_authenticate(None)
    assert api_client.get("/api/v1/jobs/alps/12/saturation/").status_code in (401, 403)


def test_the_task_and_the_periodic_selection(scored_job):
    from apps.saturation.tasks import score_job_task, score_recent_jobs_task

    assert score_recent_jobs_task.apply().get() == [scored_job.pk]
    assert score_job_task.apply(args=[scored_job.pk]).get()["status"] == "ready"
    assert score_recent_jobs_task.apply().get() == []
    JobSaturation.objects.filter(job=scored_job).update(computed=timezone.now() - timedelta(hours=2))
    assert score_recent_jobs_task.apply().get() == [scored_job.pk]


def test_no_telemetry_is_said_not_guessed(db, store):
    from apps.jobs.models import Cluster, Job

    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=13, user_name="a", account="a", state="RUNNING",
                             submit_time=timezone.now() - timedelta(hours=1), start_time=timezone.now() - timedelta(minutes=50),
                             node_list=["nid000099"])
    record = job_saturation_refresh(job)
    assert record.status == "empty" and record.score is None and "no telemetry" in record.message


def test_job_page_shows_the_score_the_limiter_in_words_and_the_figures(scored_job, client, make_user):
    job_saturation_refresh(scored_job)
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/12/?smetric=C&ssort=score").content.decode()
    record = JobSaturation.objects.get(job=scored_job)
    assert f'<dd id="saturation-score">{record.score:.0f} ' in page
    assert re.search(r"limited most of the time by\s+<strong>tensor cores</strong>", page)
    for element in ("saturation-heatmap", "saturation-bands", "saturation-scatter"):
        assert f'id="{element}"' in page
    assert '<option value="C" selected>' in page and '<option value="score" selected>' in page


def test_job_list_shows_and_sorts_by_score_and_flags(scored_job, client, make_user):
    from apps.jobs.models import Job

    job_saturation_refresh(scored_job)
    JobSaturation.objects.filter(job=scored_job).update(flags=["straggler"])
    other = Job.objects.create(cluster=scored_job.cluster, job_id=14, user_name="alice", account="a", state="COMPLETED",
                               submit_time=timezone.now() - timedelta(hours=3), start_time=timezone.now() - timedelta(hours=3),
                               end_time=timezone.now() - timedelta(hours=2), node_list=["nid000001"])
    JobSaturation.objects.create(job=other, status="ready", score=12.0, flags=["low saturation"])
    client.force_login(make_user("alice"))
    page = client.get("/jobs/?ordering=saturation").content.decode()
    first, second = page.index("alps/14"), page.index("alps/12")
    assert first < second  # 12 before the Megatron-like job's score
    assert 'title="straggler">straggler</span>' in page and 'title="low saturation">low saturation</span>' in page
    descending = client.get("/jobs/?ordering=-saturation").content.decode()
    assert descending.index("alps/12") < descending.index("alps/14")


def test_job_report_prints_the_score_table(scored_job):
    import io

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="not scored yet"):
        call_command("job_report", "alps", "12", stdout=io.StringIO())
    out = io.StringIO()
    call_command("job_report", "alps", "12", "--score", stdout=out)
    text = out.getvalue().splitlines()
    record = JobSaturation.objects.get(job=scored_job)
    assert text[1].startswith(f"Saturation {record.score:.0f}/100, limited by tensor cores")
    assert "The 10 least saturated of 32 GPUs" in out.getvalue()
    table = text[text.index(next(line for line in text if line.startswith("GPU "))) + 1:]
    assert len(table) == 10
    planted = default_planted(HOSTS)
    lowest = {" ".join(line.split()[:3]) for line in table[:5]}
    # the least saturated: the slow-NIC node's four GPUs and the power-throttled one
    assert lowest == {f"{planted.slow_nic} GPU {g}" for g in range(4)} | {f"{planted.throttled[0]} GPU {planted.throttled[1]}"}
    with pytest.raises(CommandError, match="no job alps/999"):
        call_command("job_report", "alps", "999", stdout=io.StringIO())


# ---------------------------------------------------------------------------------------------
# On the reference topology with the job's Megatron layout: stragglers on the hardware, downloads

NODES = [f"nid{n:06d}" for n in range(1, 33)]


@pytest.fixture
def placed_job(db, store):
    from django.core.management import call_command

    from apps.jobs.models import Cluster, Job
    from apps.ranks.models import JobLayout

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=21, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=NODES, node_count=32, gpus=128)
    JobLayout.objects.create(job=job, tp=4, pp=2, dp=16, world_size=128, tasks_per_node=4, source="sizes")
    for chunk in job_chunks("megatron", NODES, start, 3500, seed=8, elapsed_before_s=7200):
        store.write(chunk)
    return job


def test_stragglers_are_found_on_the_hardware_with_ranks_and_served(placed_job, api_client, make_user):
    record = job_saturation_refresh(placed_job)
    planted = default_planted(NODES)
    assert record.status == "ready" and record.gpu_model == "GH200" and record.step_seconds == 10
    gpu = next(g for g in record.per_gpu if (g["host"], g["gpu"]) == planted.throttled)
    rank = NODES.index(planted.throttled[0]) * 4 + planted.throttled[1]
    assert (gpu["rank"], gpu["nic"], gpu["straggler"]) == (rank, "hsn2", "sm_clock")
    assert gpu["switch"].count(".") == 1 and gpu["group"] == int(gpu["switch"].split(".")[0])
    api_client.force_authenticate(make_user("alice"))
    found = api_client.get("/api/v1/jobs/alps/21/stragglers/").json()
    assert {(s["level"], s["host"], s["gpu"]) for s in found} == {("gpu", *planted.throttled), ("gpu", *planted.hot),
                                                                  ("node", planted.slow_nic, None)}
    throttled = next(s for s in found if s["signal"] == "sm_clock")
    assert {"host", "gpu", "rank", "signal", "z", "duration_s", "reason"} <= set(throttled)
    assert throttled["reason"].startswith(f"rank {rank}, {planted.throttled[0]} GPU 2: SM clock 2")
    assert throttled["switch"] == gpu["switch"] and throttled["nic"] == "hsn2" and throttled["duration_s"] >= 1800
    assert "straggler" in record.flags
    grouped = api_client.get("/api/v1/jobs/alps/21/saturation/heatmap/", {"sort": "group", "metric": "power"}).json()
    groups = [row["group"] for row in grouped["rows"]]
    assert groups == sorted(groups) and grouped["unit"] == "W" and grouped["title"] == "power"


def test_downloads_as_csv_and_parquet(placed_job, api_client, make_user, tmp_path):
    import duckdb

    record = job_saturation_refresh(placed_job)
    api_client.force_authenticate(make_user("alice"))
    response = api_client.get("/api/v1/jobs/alps/21/saturation/gpus.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="saturation-alps-21-gpus.csv"'
    table = pd.read_csv(io.BytesIO(response.content))
    assert len(table) == 128 and table.loc[table["score"].idxmin(), "host"] in {default_planted(NODES).slow_nic,
                                                                                default_planted(NODES).throttled[0]}
    assert table["score"].round(2).tolist() == [g["score"] for g in record.per_gpu]
    series = api_client.get("/api/v1/jobs/alps/21/saturation/series.parquet")
    assert series.status_code == 200
    path = tmp_path / "series.parquet"
    path.write_bytes(series.content)
    rows, hosts, power = duckdb.sql(f"SELECT count(*), count(DISTINCT host), avg(power) FROM '{path}'").fetchone()
    cube_bins = len(np.load(Path(settings.DATA_DIR) / record.product)["bin_starts"])
    assert rows == 128 * cube_bins and hosts == 32 and 300 < power < 700
    assert api_client.get("/api/v1/jobs/alps/21/saturation/gpus.xlsx").status_code == 404
    api_client.force_authenticate(make_user("bob"))
    assert api_client.get("/api/v1/jobs/alps/21/saturation/gpus.csv").status_code == 404


@pytest.fixture
def seeded_ceilings(db):
    """The ceilings the data migration seeds. A transactional test that ran earlier on the same worker flushed
    them (pytest-django empties every table after such a test), so a test that reads them puts them back."""
    from importlib import import_module

    from apps.saturation.models import GpuModelCeiling

    for row in import_module("apps.saturation.migrations.0002_gpu_model_ceiling").SEED:
        GpuModelCeiling.objects.get_or_create(name=row["name"], defaults=row)


def test_staff_edit_the_ceilings_and_the_next_scoring_uses_them(seeded_ceilings, placed_job):
    from django.core.exceptions import ValidationError

    from apps.saturation.models import GpuModelCeiling

    before = job_saturation_refresh(placed_job).score
    row = GpuModelCeiling.objects.get(name="GH200")
    row.tensor = 0.7  # calibrated lower: the same activity is closer to what the GPU can sustain
    row.full_clean()
    row.save()
    after = job_saturation_refresh(placed_job).score
    assert after > before * 1.2
    row.dram = 1.5
    with pytest.raises(ValidationError, match="at most 1"):
        row.full_clean()
    h100 = GpuModelCeiling.objects.get(name="H100 SXM").as_model()
    assert h100.matches == ("H100 80GB HBM3", "H100 SXM") and "c2c" not in h100.link_peaks


def test_the_admin_lists_the_ceilings_for_staff(seeded_ceilings, placed_job, client, make_user):
    staff = make_user("ops", is_staff=True)
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    page = client.get("/admin/saturation/gpumodelceiling/")
    assert page.status_code == 200 and "GH200" in page.content.decode() and "H100 SXM" in page.content.decode()


def test_job_page_lists_stragglers_linked_to_the_topology(placed_job, client, make_user):
    job_saturation_refresh(placed_job)
    planted = default_planted(NODES)
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/21/?ssort=pp&smetric=sm_clock").content.decode()
    from urllib.parse import parse_qs, urlsplit

    links = [parse_qs(urlsplit(link.replace("&amp;", "&")).query)
             for link in re.findall(r'href="([^"]+)" class="straggler__topology"', page)]
    # each straggler on the network with the whole job kept in view, the throttled GPU's node among them
    assert [query["focus"] for query in links if query["focus"] == [planted.throttled[0]]]
    assert all(query["job"] == ["alps/21"] and query["label"] == ["straggler"] for query in links)
    assert all(query["nodes"][0] not in query["focus"] for query in links)  # the job's nodes, not just the focus
    assert f"/topology/nodes/{planted.slow_nic}/" in page and 'id="straggler-count">3<' in page
    assert '<option value="pp" selected>pipeline stage</option>' in page and '<option value="sm_clock" selected>SM clock (MHz)</option>' in page
    assert "/api/v1/jobs/alps/21/saturation/gpus.parquet" in page and 'data-download-png="saturation-heatmap"' in page
