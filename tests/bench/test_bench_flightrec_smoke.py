"""Smoke test of the Flight Recorder bench (bench/bench_flightrec.py) at a small size: the dumps are written, the
analysis names the planted rank, the floors are measured; no wall-clock time is asserted."""
from bench import bench_flightrec


def test_flightrec_bench_finds_the_planted_rank_and_measures_its_floors(tmp_path):
    report = bench_flightrec.measure(tmp_path, ranks=64, entries=120)
    assert report["status"] == "hang" and report["culprits"] == [report["expected_culprit"]] == [59]
    assert report["bytes"] > 0 and report["seconds"] > 0 and report["floor_bytes"] > 0 and report["floor_pickle"] > 0
    assert report["rss_mb"] > 0
