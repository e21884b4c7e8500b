"""The same GPU index lagging on every node (issue 35, item 6e): the limited-score page advised excluding every node
(one "resubmit with --exclude=<node>" per straggler, GPU 3 of each of the four). That is a binding or affinity pattern
— CPU/NIC affinity, NUMA binding or the rank → GPU mapping of local rank 3 — not four bad nodes: one finding says so
and no --exclude is offered for them; a straggler on one node still gets its own."""
import re
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from apps.saturation.stragglers import same_index_pattern
from apps.telemetry.synthetic_jobs import Planted, job_chunks

HOSTS = [f"nid{n:06d}" for n in range(1, 5)]
UTILISATION_ONLY = (203, 100, 113, 150, 155)


def gpu(host, index, signal="sm_clock"):
    return {"level": "gpu", "host": host, "gpu": index, "signal": signal}


def test_gpu_3_of_every_node_is_one_pattern_and_a_lone_straggler_is_not():
    found = same_index_pattern([gpu(host, 3) for host in HOSTS] + [gpu("nid000002", 1, "busy")], nodes=4)
    assert [(item["gpu"], item["hosts"], item["signals"]) for item in found] == [(3, HOSTS, ["SM clock"])]
    assert len(found[0]["items"]) == 4
    assert same_index_pattern([gpu("nid000001", 3)], nodes=4) == []  # one node: that node, not a pattern
    assert same_index_pattern([gpu("nid000001", 3), gpu("nid000002", 3)], nodes=2)[0]["hosts"] == HOSTS[:2]
    assert same_index_pattern([gpu(h, 3) for h in HOSTS[:2]], nodes=64) == []  # 2 of 64 nodes: those nodes
    node = {"level": "node", "host": "nid000001", "gpu": None, "signal": "busy"}
    assert same_index_pattern([node, gpu("nid000002", 3)], nodes=2) == []


@pytest.fixture
def slow_gpu_3_everywhere(db, store):
    """A limited-score job (utilisation only) on four nodes whose GPU 3 runs at 70 % of the SM clock on every node."""
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=33, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start - timedelta(minutes=2), start_time=start, node_list=HOSTS,
                             node_count=4, gpus=16)
    for chunk in job_chunks("megatron", HOSTS, start, 2340, seed=5, planted=Planted()):
        chunk = chunk[chunk["field"].isin(UTILISATION_ONLY)].reset_index(drop=True)
        slow = (chunk["gpu"] == 3) & (chunk["field"] == 100)
        chunk.loc[slow, "value"] = chunk.loc[slow, "value"] * 0.7
        store.write(chunk)
    return job


def test_the_limited_page_names_a_binding_pattern_instead_of_excluding_every_node(slow_gpu_3_everywhere, client, make_user):
    from apps.saturation.scoring import LIMITED_LABEL
    from apps.saturation.services import job_saturation_refresh

    record = job_saturation_refresh(slow_gpu_3_everywhere)
    assert record.score is None and record.labels[0] == LIMITED_LABEL
    lagging = [(item["host"], item["gpu"]) for item in record.stragglers if item.get("level") == "gpu"]
    assert sorted(lagging) == [(host, 3) for host in HOSTS]  # the detector finds GPU 3 of each node
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/33/").content.decode()
    findings = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[page.index('id="findings"'):page.index("first-screen__stamp")]))
    assert "GPU 3 lags its peers on every one of the job&#x27;s 4 nodes (SM clock)" in findings
    assert "binding or affinity pattern, not 4 bad nodes" in findings and "nvidia-smi topo -m" in findings
    assert "--exclude" not in findings  # no node to exclude: every node has a GPU 3
