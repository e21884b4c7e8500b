"""Stragglers with network evidence: a lagging node's finding names its NIC and counters; a NIC that stands out on a
node that keeps pace is a finding of its own; healthy NICs add nothing."""
from datetime import datetime, timezone

import pandas as pd
import pytest

from apps.network.synthetic import grid, nic_counters
from apps.saturation.products import score_job
from apps.saturation.stragglers import find_stragglers
from apps.telemetry.backends.base import aggregate_net_frame
from apps.telemetry.nic_analysis import nic_outliers, nic_rates, outliers_by_host
from apps.telemetry.synthetic_jobs import Planted, default_planted, job_chunks

START = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)
HOSTS = [f"nid{n:06d}" for n in range(1, 17)]
SIGNALS = ("S", "busy", "sm_clock", "power", "temperature")
DURATION = 3600


def gpus_of(hosts):
    return pd.DataFrame({"host": [h for h in hosts for _ in range(4)], "gpu": list(range(4)) * len(hosts),
                         "nic": [f"hsn{g}" for _ in hosts for g in range(4)]})


def evidence(hosts, degraded):
    frame = nic_counters(hosts, grid(START, pd.Timestamp(START) + pd.Timedelta(seconds=DURATION), 10),
                         run_start=pd.Timestamp(START) - pd.Timedelta(hours=1), degraded=degraded)
    return outliers_by_host(nic_outliers(nic_rates(aggregate_net_frame(frame, 60), 60)))


@pytest.fixture(scope="module")
def cube_slow_node():
    chunks = job_chunks("megatron", HOSTS, START, DURATION, seed=4, planted=Planted(slow_nic=HOSTS[-5]), elapsed_before_s=3600)
    return score_job(chunks, start=START, end=pd.Timestamp(START) + pd.Timedelta(seconds=DURATION), step_s=10,
                     hosts_order=HOSTS).cube


def detect(cube, nic_evidence):
    return find_stragglers({m: cube.values[m] for m in SIGNALS}, gpus_of(HOSTS), interval_s=cube.bin_seconds,
                           times=cube.bin_starts, steady=cube.steady_columns(), nic_evidence=nic_evidence)


def test_the_lagging_node_names_its_degraded_nic_and_counters(cube_slow_node):
    slow = HOSTS[-5]
    found = detect(cube_slow_node, evidence(HOSTS, (slow, "hsn2")))
    node = next(s for s in found if s.level == "node")
    assert node.host == slow and node.nic == "hsn2"
    assert f"network: hsn2 on {slow}: 30 % of packets retried, its peers < 1 %" in node.cause
    assert "no throttling" not in node.cause and node.cause in node.reason
    counters = node.network[0]
    assert counters["retries"] == pytest.approx(0.3 * counters["tx_packets"], rel=0.02)
    assert not any(s.level == "nic" for s in found)  # the node finding already names it


def test_healthy_nics_add_no_network_finding(cube_slow_node):
    nic_evidence = evidence(HOSTS, None)
    assert nic_evidence == {}
    found = detect(cube_slow_node, nic_evidence)
    assert not any(s.level == "nic" or s.network for s in found)
    node = next(s for s in found if s.level == "node")
    assert node.cause.startswith("no throttling: suspect the node's host side or its network links (hsn0-3")


def test_a_nic_outlier_on_a_node_that_keeps_pace_is_its_own_finding(cube_slow_node):
    other = HOSTS[2]
    found = detect(cube_slow_node, evidence(HOSTS, (other, "hsn1")))
    nic = [s for s in found if s.level == "nic"]
    assert [(s.host, s.nic, s.signal) for s in nic] == [(other, "hsn1", "nic_retries")]
    assert nic[0].reason.startswith(f"hsn1 on {other}: 30 % of packets retried") and "keep pace" in nic[0].reason
    assert nic[0].deviation == pytest.approx(0.30, abs=0.01)
    node = next(s for s in found if s.level == "node")  # the slow node is still there, without a NIC to blame
    assert node.host == HOSTS[-5] and "no throttling" in node.cause


def test_nic_findings_without_gpu_signals():
    """Too few GPUs to judge the GPUs: the NIC evidence still reaches the user."""
    found = find_stragglers({}, gpus_of(HOSTS[:1]), interval_s=60,
                            nic_evidence={HOSTS[0]: [{"host": HOSTS[0], "nic": "hsn0", "kinds": ["link"], "link_down": 3.0,
                                                      "reason": f"hsn0 on {HOSTS[0]}: link went down 3 times"}]})
    assert [(s.level, s.signal, s.host) for s in found] == [("nic", "nic_link_down", HOSTS[0])]


@pytest.mark.django_db
def test_scoring_reads_the_nic_counters_of_the_jobs_nodes(megatron_job, store):
    from apps.saturation.services import job_saturation_refresh

    hosts = [f"nid{n:06d}" for n in range(1, 9)]
    job = megatron_job(job_id=41, hosts=hosts, minutes=60, seconds=3500, seed=5)
    slow = default_planted(hosts).slow_nic
    times = grid(job.start_time, job.start_time + pd.Timedelta(seconds=3500), 10)
    store.write_net(nic_counters(hosts, times, run_start=job.start_time, degraded=(slow, "hsn2")))
    store.write_net(nic_counters(["nid000099"], times, run_start=job.start_time, degraded=("nid000099", "hsn0")))  # not the job's
    record = job_saturation_refresh(job)
    named = [s for s in record.stragglers if s.get("network")]
    assert named and {s["host"] for s in named} == {slow}
    assert all("hsn2 on " + slow in s["reason"] for s in named)
    assert not any(s["host"] == "nid000099" for s in record.stragglers)
