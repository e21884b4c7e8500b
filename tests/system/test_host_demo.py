"""The host part of the demo (issue 39): the demo researcher's data-loader-bound job is named as waiting on the host,
its first node's GPU 1 holds 23 GB of page cache (on the job page and the node's own history), and the feeder keeps that
node's host fields coming."""
from datetime import datetime, timedelta

from apps.core.demo import FeedContext, demo_clock
from apps.jobs.models import Job
from apps.system.host_demo import LOADER_ID, LOADER_NAME, feed

from tests.demo_snapshot import load_demo


def test_the_demo_has_a_data_loader_bound_job_and_page_cache_in_gpu_memory(transactional_db, client, store):
    from apps.appmetrics import panel as appmetrics_panel
    from apps.system import host_panel

    load_demo()
    job = Job.objects.get(job_id=LOADER_ID)
    assert job.name == LOADER_NAME and job.user_name == "demo" and job.state == "COMPLETED"
    titles = [f.title for f in appmetrics_panel.summary(job).findings] + [f.title for f in host_panel.summary(job).findings]
    assert any(t.startswith("GPUs wait on the host: during the ") for t in titles), titles
    node = job.node_list[0]
    assert f"Page cache holds 23 GB of GPU memory on {node} GPU 1 during the job." in titles

    client.login(username="demo", password="belvedere-demo")
    history = client.get(f"/api/v1/nodes/{node}/history/?since={job.start_time:%Y-%m-%dT%H:%M:%SZ}").json()
    assert max(v for v in history["gpu_page_cache"]["1"] if v is not None) == 23e9
    assert any(entry["label"] == f"{LOADER_NAME} (alps/{LOADER_ID})" for entry in history["jobs"])

    clock = demo_clock()
    origin = datetime.fromisoformat(clock["origin"])
    tick = FeedContext(seed=int(clock["seed"]), start=origin, end=origin + timedelta(minutes=1), origin=origin,
                       memory=dict(clock.get("memory") or {}))
    assert feed(tick)["samples"] == 6 * 8  # six 10-s moments, eight host fields of the node
    assert store.read_host("alps", hosts=[node], domains=["gpu1"], start=origin + timedelta(seconds=1),
                           end=origin + timedelta(minutes=2))["value"].tolist() == [23e9] * 6
