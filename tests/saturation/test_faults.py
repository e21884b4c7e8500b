"""Hardware faults in straggler findings, put on the node (issue 35, item 5): the NIC retrying its packets, the hot GPU
and the throttled GPU of the job page become faults of their nodes; fabric findings and slow NICs do not."""
from datetime import datetime, timezone

from apps.saturation.faults import node_faults

NIC = {"host": "nid000473", "nic": "hsn2", "kinds": ["retries"], "retry_fraction": 0.31,
       "reason": "hsn2 on nid000473: 31 % of packets retried, its peers < 1 %"}


def by_key(faults):
    return {(fault["host"], fault["kind"]): fault for fault in faults}


def test_the_megatron_pages_three_faults_become_node_faults():
    stragglers = [
        {"level": "nic", "host": "nid000473", "nic": "hsn2", "signal": "nic_retries", "network": [NIC],
         "reason": NIC["reason"] + "; the node's GPUs keep pace with their peers so far"},
        {"level": "gpu", "host": "nid000101", "gpu": 2, "signal": "temperature", "cause": "running hot",
         "reason": "rank 9, nid000101 GPU 2: temperature 11 °C above its peers for 42 min, running hot",
         "start": "2025-03-01T10:04:00Z"},
        {"level": "gpu", "host": "nid000202", "gpu": 1, "signal": "sm_clock", "cause": "power-limited",
         "reason": "rank 17, nid000202 GPU 1: SM clock 22 % below its peers for 30 min, power-limited"},
        {"level": "switch", "switch": "3.4", "hosts": ["nid000300", "nid000301"], "signal": "busy", "cause": "shared fabric"},
    ]
    faults = by_key(node_faults(stragglers))
    assert set(faults) == {("nid000473", "nic_retries"), ("nid000101", "hot_gpu"), ("nid000202", "throttled_gpu")}
    assert faults[("nid000473", "nic_retries")]["what"] == NIC["reason"]
    assert faults[("nid000473", "nic_retries")]["severity"] == "warning"  # its GPUs keep pace: the job does not wait yet
    assert faults[("nid000101", "hot_gpu")]["severity"] == "critical"
    assert faults[("nid000101", "hot_gpu")]["since"] == datetime(2025, 3, 1, 10, 4, tzinfo=timezone.utc)
    assert "power-limited" in faults[("nid000202", "throttled_gpu")]["what"]


def test_a_lagging_node_whose_nic_retries_is_a_critical_nic_fault_and_a_slow_nic_is_none():
    lagging = {"level": "node", "host": "nid000473", "hosts": ["nid000473"], "signal": "busy", "cause": "network: ...",
               "network": [NIC]}
    slow = {"level": "nic", "host": "nid000500", "nic": "hsn0", "signal": "nic_throughput",
            "network": [{"host": "nid000500", "nic": "hsn0", "kinds": ["throughput"], "reason": "moves 40 % less"}]}
    faults = node_faults([lagging, slow])
    assert [(f["host"], f["kind"], f["severity"]) for f in faults] == [("nid000473", "nic_retries", "critical")]


def test_healthy_stragglers_and_nothing_give_no_fault():
    assert node_faults([]) == []
    assert node_faults([{"level": "gpu", "host": "nid000001", "gpu": 0, "signal": "busy", "cause": ""}]) == []
