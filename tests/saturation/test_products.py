"""Scoring a job's raw samples into its saturation product (the demo generator's job as input)."""
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from apps.saturation.products import SaturationCube, score_samples, to_grid
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
    cube, summary, scores, grid = score_samples(frame, hosts_order=HOSTS, bins=50)
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
