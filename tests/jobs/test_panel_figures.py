"""Panel figures as JSON: drawn after the first paint, 304 when unchanged, 404 for what does not exist or
may not be seen."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.telemetry.contract import synthetic


@pytest.fixture
def scored(db, store):
    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.synthetic_jobs import job_chunks

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=20)
    hosts = [f"nid{n:06d}" for n in range(1, 5)]
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=41, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=hosts, gpus=16)
    for chunk in job_chunks("megatron", hosts, start, 15 * 60, seed=3):
        store.write(chunk)
    job_saturation_refresh(job)
    return job


def test_bands_and_scatter_load_as_json_and_answer_304_when_unchanged(scored, client, make_user):
    client.force_login(make_user("alice"))
    bands = client.get("/jobs/alps/41/panels/saturation/bands.json")
    assert bands.status_code == 200 and bands["ETag"]
    names = [trace.get("name") for trace in bands.json()["data"]]
    assert "saturation S: median" in names and "saturation S: 10-90 %" in names
    again = client.get("/jobs/alps/41/panels/saturation/bands.json", HTTP_IF_NONE_MATCH=bands["ETag"])
    assert again.status_code == 304 and again.content == b""
    scatter = client.get("/jobs/alps/41/panels/saturation/scatter.json").json()
    sizes = scatter["data"][0]["marker"]["size"]
    texts = scatter["data"][0]["text"]
    # 16 GPUs: each either has its own dot or is counted in a shared one
    shared = sum(int(text.split(" GPUs")[0].replace(",", "")) if " GPUs, e.g." in text else 1 for text in texts)
    assert shared == 16 and len(sizes) == len(texts)


def test_unknown_panels_figures_and_foreign_jobs_are_404(scored, client, make_user):
    client.force_login(make_user("alice"))
    assert client.get("/jobs/alps/41/panels/saturation/nothing.json").status_code == 404
    assert client.get("/jobs/alps/41/panels/nothing/bands.json").status_code == 404
    client.force_login(make_user("bob"))
    assert client.get("/jobs/alps/41/panels/saturation/bands.json").status_code == 404
