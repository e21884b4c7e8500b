"""The culprit's evidence from the same minutes: its node's Slingshot NICs (retries and link-down against the job's
other NICs), read from the telemetry store's NIC counters as the network app writes them. Real dumps
(``synthetic.megatron_dumps``), the real analysis and store; no layout, so Slurm's block placement puts rank 14 on
the fourth node's GPU 2, whose NIC is hsn2."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.flightrec.selectors import flight_body
from apps.flightrec.services import flight_dump_store, job_flight_analyse
from apps.flightrec.synthetic import megatron_dumps
from apps.jobs.models import Cluster, Job, node_search_text
from apps.network.synthetic import grid, nic_counters

HOSTS = [f"nid{n:06d}" for n in range(470, 478)]
CULPRIT = 14  # HOSTS[3] = nid000473, GPU 2


@pytest.fixture
def hung_job(db, store, settings, tmp_path):
    settings.FLIGHTREC_DIR = str(tmp_path / "flightrec")
    end = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    start = end - timedelta(minutes=50)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=7, user_name="alice",
                             account="a-llm01", state="TIMEOUT", node_list=HOSTS, node_search=node_search_text(HOSTS),
                             node_count=len(HOSTS), tasks=32, gpus=32, start_time=start, end_time=end)
    for rank, data in megatron_dumps(32, 60, tp=4, pp=2, culprit=CULPRIT, end_ns=int((end - timedelta(seconds=30)).timestamp() * 1e9)):
        flight_dump_store(job, rank, data, "pickle")
    assert job_flight_analyse(job).status == "hang"
    return job


def counters(job, degraded):
    return nic_counters(HOSTS, grid(job.start_time, job.end_time, 10), run_start=job.start_time - timedelta(hours=1),
                        degraded=degraded)


def culprit_of(job) -> dict:
    body = flight_body(job)
    (culprit,) = [c for c in body["culprits"] if c["rank"] == CULPRIT]
    assert (culprit["host"], culprit["gpu"], culprit["nic"]) == ("nid000473", 2, "hsn2")
    return body, culprit


def test_a_culprit_whose_nic_retried_in_those_minutes_gets_a_warning_naming_the_nic_and_share(hung_job, store):
    store.write_net(counters(hung_job, degraded=("nid000473", "hsn2")))
    body, culprit = culprit_of(hung_job)
    network = [e for e in culprit["evidence"] if e["kind"] == "network"]
    assert [e["level"] for e in network] == ["warning"], culprit["evidence"]
    assert network[0]["words"].startswith("hsn2 on nid000473: 30 % of packets retried, its peers < 1 %")
    assert network[0]["words"].endswith("in the 5 minutes before the stop")
    # No idle GPU or XID on record: the NIC is the worst evidence, so the headline says it.
    assert body["headline"].startswith("nid000473 GPU 2: rank 14 never entered")
    assert "; hsn2 on nid000473: 30 % of packets retried" in body["headline"]


def test_a_quiet_nic_is_said_as_such_and_another_nodes_retries_are_not_the_culprits(hung_job, store):
    store.write_net(counters(hung_job, degraded=("nid000470", "hsn1")))  # a node of the job, not the culprit's
    body, culprit = culprit_of(hung_job)
    network = [e for e in culprit["evidence"] if e["kind"] == "network"]
    assert [e["level"] for e in network] == ["info"], culprit["evidence"]
    assert network[0]["words"].startswith("hsn2 on nid000473: 0.")  # well under 1 % retried
    assert "its link never went down in the 5 minutes before the stop" in network[0]["words"]
    assert "nid000470" not in body["headline"] and "retried" not in body["headline"]


def test_without_nic_counters_there_is_no_network_line(hung_job):
    _body, culprit = culprit_of(hung_job)
    assert [e for e in culprit["evidence"] if e["kind"] == "network"] == []
