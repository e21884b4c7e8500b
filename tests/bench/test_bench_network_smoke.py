"""Smoke test of the network ingestion bench (bench/bench_network.py) at a tiny size: every number is
produced and every row is stored; no wall-clock time is asserted."""
from bench import bench_network


def test_network_bench_ingests_every_row_and_measures_a_floor(tmp_path):
    report = bench_network.measure(tmp_path, nics=8, seconds=2)
    assert report["rows"] == 8 * 6 and report["stored"] == report["expected"] == 2 * 8 * 6
    assert report["seconds"] > 0 and report["floor"] > 0
