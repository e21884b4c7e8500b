"""Garbled and hostile rank-0 logs: every one is explained (LogParseError / a 400 naming ``log``), none
crashes the parser or the upload (issue 16 item 6: no 500 from hand-parsed numbers)."""
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.jobs.models import Cluster, Job, node_search_text
from apps.ranks.logparse import LogParseError, parse_megatron_log
from apps.ranks.models import JobLayout
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.services import topology_apply

DATA = Path(__file__).resolve().parent / "data"
LOG = (DATA / "megatron_2n_tp2_pp2_dp2.log").read_text()
NUM_LAYERS = "  num_layers ...................................... 16"
assert NUM_LAYERS in LOG and "using world size: 8," in LOG and "tensor-model-parallel size: 2" in LOG


def with_num_layers(value: str) -> str:
    return LOG.replace(NUM_LAYERS, NUM_LAYERS[:-2] + value)


@pytest.mark.parametrize("text, message", [
    (with_num_layers("²"), r"num_layers is '²' in the argument dump, not a whole number"),
    (with_num_layers("١٦"), r"num_layers is '١٦' in the argument dump, not a whole number"),
    (with_num_layers("1" * 30), r"num_layers has 30 digits; the line is garbled"),
    (LOG.replace("using world size: 8,", "using world size: ²,"), r"the 'using world size' line has no world size"),
    (LOG.replace("tensor-model-parallel size: 2", "tensor-model-parallel size: " + "9" * 5000),
     r"the tensor-model-parallel size has 5,000 digits"),
])
def test_garbled_numbers_are_parse_errors(text, message):
    with pytest.raises(LogParseError, match=message):
        parse_megatron_log(text)


def test_absurd_nccl_numbers_are_ignored_not_a_crash():
    line = "1: nid006001:123:456 [0] NCCL INFO comm 0x1 rank " + "9" * 5000 + " nRanks " + "9" * 5001 + " nNodes 1 localRanks 4 localRank 0"
    device = "0: nid006000:1:2 [" + "9" * 5000 + "] NCCL INFO comm 0x2 rank 0 nRanks 8 cudaDev " + "7" * 5000
    parsed = parse_megatron_log(LOG + "\n" + line + "\n" + device + "\n")
    assert parsed.sizes["tp"] == 2 and parsed.sizes["world_size"] == 8


@pytest.fixture
def alice_and_job(db, api_client, make_user):
    topology_apply(generate(DragonflyParameters(groups=4, first_nid=6000)), source="test", prune=True)
    hosts = sorted({entry["host"] for entry in parse_megatron_log(LOG).ranks})
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=8, user_name="alice", state="RUNNING", node_list=hosts, node_count=len(hosts),
                       tasks=len(hosts) * 4, node_search=node_search_text(hosts))
    api_client.force_authenticate(make_user("alice"))
    return api_client


def upload(client, text: str):
    return client.post("/api/v1/jobs/alps/8/layout/log/", {"log": SimpleUploadedFile("slurm-8.out", text.encode())},
                       format="multipart")


@pytest.mark.parametrize("text, message", [
    (with_num_layers("²"), "num_layers is '²'"),
    (LOG.replace("tensor-model-parallel size: 2", "tensor-model-parallel size: " + "9" * 5000), "5,000 digits"),
    # Parsed fine, but out of the range the layout API accepts (PostgreSQL's integer would overflow: a 500).
    (with_num_layers("100000000000"), "num_layers: Ensure this value is less than or equal to 100000."),
])
def test_uploads_of_such_logs_are_400s_naming_the_log(alice_and_job, text, message):
    response = upload(alice_and_job, text)
    assert response.status_code == 400, response.content
    body = response.json()
    assert [error["field"] for error in body["errors"]] == ["log"] and message in body["errors"][0]["message"], body
    assert not JobLayout.objects.exists()


def test_the_clean_log_still_uploads(alice_and_job):
    response = upload(alice_and_job, LOG)
    assert response.status_code == 200 and response.json()["layout"]["exact_map"] is True
