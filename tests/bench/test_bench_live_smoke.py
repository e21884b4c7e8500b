"""Smoke test of the live bench (bench/bench_live.py) at a tiny size: a running 32-GPU job of 15 minutes,
blocks of 2 nodes, one update round. It checks that every number is produced from real processes — the
updates, the split scoring on 1 and 2 worker processes, a posted minute reaching the heatmap through
gunicorn, the worker and beat — never the targets: no wall-clock time is asserted."""
import math

import pytest

from bench import bench_live

NODES, HOURS = 8, 0.25


@pytest.mark.integration
def test_live_bench_measures_updates_split_scoring_and_the_post_to_heatmap_latency(tmp_path):
    report = bench_live.measure(tmp_path / "var", NODES, HOURS, block_nodes=2, rounds=1)
    assert report.info["gpus"] == 4 * NODES and report.info["samples"] > 0
    update = report.update
    assert update["full_s"] > 0 and len(update["rounds"]) == 1
    (only,) = update["rounds"]
    assert only["seconds"] > 0 and only["floor_s"] > 0 and only["written"] > 0
    assert 0 < only["columns"] < HOURS * 360 / 2  # the update read the new minute and the re-read margin, not the job
    assert update["stragglers"] == "all 3 planted found"
    assert set(report.split) == {1, 2}
    for count in (1, 2):
        assert report.split[count]["blocks"] == NODES // 2 and report.split[count]["seconds"] > 0
        assert report.split[count]["score"] == update["median"]["score"]  # the same samples, split or not
    assert report.latency_skipped == "" and report.latency is not None
    latency = report.latency
    assert latency["accepted"] == latency["samples"] > 0 and latency["seen"] > latency["last_ts"]
    assert 0 < latency["posted_s"] < latency["seconds"]
    assert any(run["status"] == "succeeded" for run in latency["runs"])  # the event-driven refresh carried it
    figures = report.figures()
    assert [f.name.split(": ")[1].split(",")[0] for f in figures] == [
        "update +1 min of a 32-GPU", "from scratch", "from scratch", "POST 1 min -> visible in heatmap"]
    assert all(math.isfinite(f.seconds) and f.seconds > 0 and f.floor_seconds > 0 for f in figures)
    assert "target >= 20x" in figures[0].note and "full rescoring in the same run" in figures[0].note
    assert "1 worker process" in figures[1].name and "2 worker processes" in figures[2].name
    assert figures[2].floor_name == "the same on 1 worker process"
    assert "target <= 30 s" in figures[3].note
