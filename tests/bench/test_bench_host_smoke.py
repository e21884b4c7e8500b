"""Smoke test of the host-field ingestion bench (bench/bench_host.py) at a tiny size: every row passes the registry's
checks and is stored as a host sample; no wall-clock time is asserted."""
from bench import bench_host


def test_host_bench_ingests_every_row_and_measures_a_floor(tmp_path):
    report = bench_host.measure(tmp_path, nodes=3, intervals=2)
    assert report["per_node"] == 50 and report["rows"] == 3 * 50
    assert report["stored"] == report["expected"] == 2 * 3 * 50
    assert report["seconds"] > 0 and report["floor"] > 0
