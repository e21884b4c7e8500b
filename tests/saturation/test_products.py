"""Scoring a job's raw samples into its saturation product (the demo generator's job as input)."""
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from apps.saturation.products import SaturationCube, score_job, score_samples, scoring_step, to_grid
from apps.telemetry.synthetic_jobs import default_planted, job_chunks

START = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)
HOSTS = [f"nid{n:06d}" for n in range(1, 9)]


def megatron(duration=3600):
    return pd.concat(job_chunks("megatron", HOSTS, START, duration, seed=3), ignore_index=True)


def test_grid_keeps_the_jobs_node_order_and_marks_missing_samples():
    frame = megatron(600)
    frame = frame[~((frame.host == "nid000003") & (frame.gpu == 1) & (frame.field == 1004) & (frame.ts == frame.ts.max()))]
    grid = to_grid(frame, hosts_order=list(reversed(HOSTS)))
    assert list(grid.hosts[:4]) == ["nid000008"] * 4 and len(grid.times) == 60
    row = list(zip(grid.hosts, grid.gpus)).index(("nid000003", 1))
    assert np.isnan(grid.values[1004][row, -1]) and np.isfinite(grid.values[1004][row, :-1]).all()
    assert grid.interval_s == 10.0


def test_the_megatron_job_is_compute_bound_and_its_straggler_shows_in_the_cube(tmp_path):
    frame = megatron()
    scored = score_samples(frame, hosts_order=HOSTS, bins=50)
    cube, summary = scored.cube, scored.summary
    # training: tensor ~0.62 of a 0.93 ceiling -> S ~0.67, limiter tensor
    assert 55 <= summary.score <= 75 and summary.limiter == "tensor"
    assert summary.window.start >= 55  # warm-up (10 min at 10 s) trimmed
    assert cube.values["S"].shape == (32, 45) and cube.bin_seconds == 80.0  # at most 50 bins: 8 samples each
    host, gpu = default_planted(HOSTS).throttled
    row = list(zip(cube.hosts, cube.gpus)).index((host, gpu))
    clock = np.nanmedian(cube.values["clock_factor"], axis=1)
    assert clock[row] < 0.8 * np.median(np.delete(clock, row))
    cube.save(tmp_path / "s.npz")
    again = SaturationCube.load(tmp_path / "s.npz")
    assert np.array_equal(again.values["S"], cube.values["S"], equal_nan=True)
    assert again.warmup_end == cube.warmup_end and list(again.hosts) == list(cube.hosts)
    assert summary.energy_j and 0 < summary.energy_low_j < summary.energy_j  # checkpoints are low-saturation time


def test_nodes_sampling_at_different_moments_share_one_grid_and_buckets_weigh_by_count():
    """Two nodes' collectors sample 3 s apart and DCGM stamps each field on its own: on the scoring
    step they land in the same columns. Bucket means count by their samples."""
    t0 = pd.Timestamp("2026-11-21T08:00:00Z")
    rows = []
    for host, offset in (("a", 0.0), ("b", 3.0)):
        for k in range(6):
            for field, value in ((1004, 0.5 + 0.01 * k), (1001, 0.9)):
                rows.append({"ts": t0 + pd.Timedelta(seconds=offset + 10 * k + 0.000123 * field), "host": host, "gpu": 0,
                             "field": field, "value": value})
    frame = pd.DataFrame(rows)
    grid = to_grid(frame, ["b", "a"], start=t0, step_s=10, columns=6)
    assert list(grid.hosts) == ["b", "a"] and grid.values[1004].shape == (2, 6)
    assert np.allclose(grid.values[1004], [[0.5 + 0.01 * k for k in range(6)]] * 2)
    unaligned = to_grid(frame)  # on its own timestamps nothing lines up
    assert np.isnan(unaligned.values[1004]).mean() > 0.7
    means = pd.DataFrame({"bucket": [t0, t0], "host": ["a", "a"], "gpu": [0, 0], "field": [1004, 1004],
                          "mean": [0.2, 0.8], "count": [1, 3]})
    assert to_grid(means, start=t0, step_s=10, columns=1).values[1004][0, 0] == pytest.approx((0.2 + 3 * 0.8) / 4)


def test_reasons_become_shares_of_time_not_means_of_a_bitmask():
    t0 = pd.Timestamp("2026-11-21T08:00:00Z")
    reasons = [0x4, 0x4, 0x0, 0x20 | 0x4, 0x0, 0x0, 0x0, 0x40, 0x1, 0x0]  # 1 s samples in one 10 s bucket
    frame = pd.DataFrame({"ts": [t0 + pd.Timedelta(seconds=s) for s in range(10)], "host": "a", "gpu": 0, "field": 112,
                          "value": reasons})
    grid = to_grid(frame, start=t0, step_s=10, columns=1)
    power, thermal = grid.throttle
    assert power[0, 0] == pytest.approx(0.3) and thermal[0, 0] == pytest.approx(0.2)
    assert 112 not in grid.values


def test_scoring_in_node_chunks_equals_scoring_the_whole_job():
    frames = list(job_chunks("megatron", HOSTS, START, 1800, seed=9, hosts_per_chunk=3))
    end = pd.Timestamp(START) + pd.Timedelta(seconds=1800)
    whole = score_job([pd.concat(frames, ignore_index=True)], start=START, end=end, step_s=10, hosts_order=HOSTS)
    parts = score_job(reversed(frames), start=START, end=end, step_s=10, hosts_order=HOSTS)
    assert list(parts.hosts) == list(whole.hosts) and parts.summary.score == whole.summary.score
    assert np.array_equal(parts.cube.values["S"], whole.cube.values["S"], equal_nan=True)
    # at 30 s the same job is scored on bucket means: close, not identical
    coarse = score_job(frames, start=START, end=end, step_s=30, hosts_order=HOSTS)
    assert coarse.interval_s == 30 and abs(coarse.summary.score - whole.summary.score) < 2


def test_the_product_keeps_raw_fields_and_loads_only_what_is_asked(tmp_path):
    scored = score_samples(megatron(900), hosts_order=HOSTS)
    assert {"sm_clock", "power", "temperature", "power_capped", "thermal"} <= set(scored.cube.values)
    assert 1500 < np.nanmedian(scored.cube.values["sm_clock"]) <= 1980
    scored.cube.save(tmp_path / "s.npz")
    assert SaturationCube.metrics_in(tmp_path / "s.npz") == set(scored.cube.values)
    assert set(SaturationCube.load(tmp_path / "s.npz", ["power"]).values) == {"power"}


def test_scoring_step_keeps_long_jobs_bounded():
    assert scoring_step(3 * 3600) == 10 and scoring_step(6.6 * 3600) == 20 and scoring_step(24 * 3600) == 60
    assert scoring_step(0) == 10


def test_no_usable_samples_is_an_error_that_says_so():
    with pytest.raises(ValueError, match="no samples"):
        score_job([], start=START, end=START.replace(hour=9), step_s=10)
    only_power = pd.DataFrame({"ts": [pd.Timestamp(START)], "host": ["a"], "gpu": [0], "field": [155], "value": [300.0]})
    with pytest.raises(ValueError, match="none of the fields the score needs"):
        score_samples(only_power)


def test_heatmap_rows_merge_for_very_large_jobs_and_sort_by_group():
    from apps.saturation.products import heatmap_order, merge_rows

    matrix = np.arange(20, dtype=float).reshape(10, 2)
    matrix[1, 0] = np.nan
    merged, firsts = merge_rows(matrix, 4)
    assert list(firsts) == [0, 3, 6, 9] and merged[0, 0] == pytest.approx((0 + 4) / 2)  # NaN ignored
    per_gpu = [{"group": 2, "switch": "2.10"}, {"group": 1, "switch": "1.3"}, {"group": 2, "switch": "2.9"}, {"group": None}]
    assert heatmap_order(per_gpu, "group") == [1, 2, 0, 3]
