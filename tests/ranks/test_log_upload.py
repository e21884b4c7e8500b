"""Uploading rank 0's log: the layout and the exact rank map come from it; bad logs are explained."""
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.jobs.models import Cluster, Job, node_search_text
from apps.ranks.logparse import parse_megatron_log
from apps.ranks.models import JobLayout
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.services import topology_apply

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def job_of_log(db):
    # The sample logs ran on nid006000-nid006127 and nid006437-38: a 4-group system numbered from there.
    topology_apply(generate(DragonflyParameters(groups=4, first_nid=6000)), source="test", prune=True)

    def make(log_name: str, job_id: int) -> Job:
        hosts = sorted({entry["host"] for entry in parse_megatron_log((DATA / log_name).read_text()).ranks})
        cluster, _ = Cluster.objects.get_or_create(name="alps")
        return Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", state="RUNNING", node_list=hosts,
                                  node_count=len(hosts), tasks=len(hosts) * 4, node_search=node_search_text(hosts))

    return make


def upload(client, job_id: int, name: str, content: bytes):
    return client.post(f"/api/v1/jobs/alps/{job_id}/layout/log/", {"log": SimpleUploadedFile(name, content)}, format="multipart")


def test_a_realistic_megatron_log_gives_sizes_and_the_exact_map(api_client, make_user, job_of_log):
    job_of_log("megatron_128n_tp4_pp8_dp16_srun_l.log", 7)
    api_client.force_authenticate(make_user("alice"))
    response = upload(api_client, 7, "slurm-7.out", (DATA / "megatron_128n_tp4_pp8_dp16_srun_l.log").read_bytes())
    assert response.status_code == 200, response.json()
    layout = response.json()["layout"]
    assert (layout["tp"], layout["pp"], layout["dp"], layout["source"], layout["exact_map"]) == (4, 8, 16, "log", True)
    parsed = parse_megatron_log((DATA / "megatron_128n_tp4_pp8_dp16_srun_l.log").read_text())
    stored = JobLayout.objects.get(job__job_id=7).rank_map
    assert stored == [[entry["host"], entry["local_rank"]] for entry in parsed.ranks]


@pytest.mark.parametrize("log_name, text", [
    ("broken_tp_mismatch.log", "tensor_model_parallel_size=4 but the 'using world size' line says 8"),
    ("broken_garbled_arguments.log", "line"),
])
def test_a_malformed_log_says_what_is_missing_and_stores_nothing(api_client, make_user, job_of_log, log_name, text):
    job_of_log("megatron_2n_tp2_pp2_dp2.log", 8)
    api_client.force_authenticate(make_user("alice"))
    response = upload(api_client, 8, log_name, (DATA / log_name).read_bytes())
    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0]["field"] == "log" and text in body["detail"], body
    assert not JobLayout.objects.exists()


def test_a_log_without_any_layout_is_refused(api_client, make_user, job_of_log):
    job_of_log("megatron_2n_tp2_pp2_dp2.log", 9)
    api_client.force_authenticate(make_user("alice"))
    response = upload(api_client, 9, "empty.out", b"hello from a job that printed nothing useful\n")
    assert response.status_code == 400
    assert "argument" in response.json()["detail"].lower()
    assert api_client.post("/api/v1/jobs/alps/9/layout/log/", {}, format="multipart").json()["errors"][0]["field"] == "log"
