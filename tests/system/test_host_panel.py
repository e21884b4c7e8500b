"""The host side on the job page (issue 39, acceptance 2) through the real stores: a synthetic GH200 job whose dips
coincide with saturated data-loader workers gets the host-bound finding ("limited by host (data loading)") and a host row
in its throughput figure; the same job's dips without the loaders' part, and a job whose dips are checkpoints, do not;
page cache in GPU memory above HOST_PAGE_CACHE_GPU_GB is named before and during the job."""
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from apps.jobs.models import Cluster, Job, node_search_text
from apps.system.host_synthetic import data_loader_job

pytestmark = pytest.mark.django_db
NODES = ["nid001234", "nid001235"]


def build(store, job_id, **options):
    from apps.telemetry.services import job_telemetry_refresh

    start = (timezone.now() - timedelta(hours=2)).replace(microsecond=0, second=0, minute=0)
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=job_id, name=f"gh200-{job_id}", user_name="olive", account="a-llm01",
                             state="COMPLETED", submit_time=start, start_time=start, end_time=start + timedelta(hours=1),
                             node_list=NODES, node_count=2, gpus=8, nodes="nid[001234-001235]", node_search=node_search_text(NODES))
    data = data_loader_job(NODES, job_id, start, 3600, **options)
    store.write(data["gpu"])
    host = data["host"]
    before = host[host["ts"] == host["ts"].min()].assign(ts=pd.Timestamp(start) - pd.Timedelta(minutes=5))
    store.write_host(pd.concat([before, host], ignore_index=True))
    store.write_job_series(data["app"])
    job_telemetry_refresh(job)
    return job


def findings(job):
    from apps.appmetrics import panel as appmetrics_panel
    from apps.system import host_panel

    found = []
    for summary in (appmetrics_panel.summary(job), host_panel.summary(job)):
        found += [f.title for f in (summary.findings if summary else [])]
    return found


def test_a_job_waiting_on_its_data_loaders_is_named_with_its_host_row(store, client, make_user):
    job = build(store, 4242, stall_share=0.25, checkpoint_every_s=1600, page_cache_gpu={("nid001234", 1): 23e9})
    titles = findings(job)
    host = [t for t in titles if t.startswith("GPUs wait on the host: during the ")]
    assert len(host) == 1 and host[0].endswith(" of iterations that ran slow, the ranks' data-loader workers were at "
                                               f"{host[0].split('workers were at ')[1].split(' %')[0]} % of their CPUs and the "
                                               "GPUs idle — limited by host (data loading).")
    assert "Page cache holds 23 GB of GPU memory on nid001234 GPU 1 before the job." in titles
    assert "Page cache holds 23 GB of GPU memory on nid001234 GPU 1 during the job." in titles
    assert not any("GPU 0" in t for t in titles)  # 0.3 GB is below the threshold
    from apps.vetting.selectors import job_preflight  # the same fact where vetting reads the job's pre-flight
    assert [item["sentence"] for item in job_preflight(job)["page_cache_in_gpu"]] == [
        "page cache holds 23 GB of GPU memory on nid001234 GPU 1 before the job"]
    make_user("olive", accounts=["a-llm01"])
    client.login(username="olive", password="pw-for-tests-1")
    figure = client.get(f"/jobs/alps/4242/panels/appmetrics/throughput.json").json()
    host_traces = [t for t in figure["data"] if t["name"] in ("CPU busy", "data-loader CPU", "host memory used")]
    assert len(host_traces) == 3 and max(v for v in host_traces[1]["y"] if v is not None) >= 0.95
    gpu_axis = next(t["yaxis"] for t in figure["data"] if t["name"].startswith("SM active") or t["name"].startswith("GPU busy"))
    assert int(host_traces[0]["yaxis"][1:] or 1) > int(gpu_axis[1:] or 1)  # the host row sits under the GPU row
    heatmap = client.get("/api/v1/jobs/alps/4242/telemetry/heatmap/?field=1002").json()  # the host strip under the GPUs
    assert [row["label"] for row in heatmap["host"]] == ["host: CPU busy", "host: data-loader CPU", "host: memory used"]
    loader = heatmap["host"][1]["values"]
    assert len(loader) == len(heatmap["times"]) and max(v for v in loader if v is not None) >= 0.95
    assert min(v for v in loader if v is not None) <= 0.5  # the stalls stand out from the steady stretches
    from apps.saturation.services import job_saturation_refresh
    job_saturation_refresh(job)  # the saturation heatmap draws the same host rows under its GPUs
    saturation = client.get("/api/v1/jobs/alps/4242/saturation/heatmap/?encoding=u8&metric=S").json()
    assert [row["label"] for row in saturation["host"]] == [row["label"] for row in heatmap["host"]]
    assert len(saturation["host"][1]["values"]) == len(saturation["times"])
    page = client.get("/jobs/alps/4242/").content.decode()
    assert 'href="/nodes/nid001234/"' in page and "GPUs wait on the host" in page


def test_the_same_dips_without_saturated_loaders_are_not_the_hosts(store):
    titles = findings(build(store, 4243, stall_share=0.25, loader_bound=False))
    assert not any("host" in t.lower() for t in titles), titles


def test_a_job_whose_dips_are_checkpoints_gets_no_host_finding(store, settings):
    settings.HOST_PAGE_CACHE_GPU_GB = 50
    titles = findings(build(store, 4244, stall_share=0.0, checkpoint_every_s=600, page_cache_gpu={("nid001234", 1): 23e9}))
    assert any("checkpoint" in t for t in titles) and not any("wait on the host" in t for t in titles), titles
    assert not any("Page cache" in t for t in titles)  # 23 GB under a 50 GB threshold
