"""GPU-hours lost (apps/saturation/waste.py): idle GPUs whole, busy ones by 1 − S, unknown ones never guessed."""
import math

import pytest

from apps.saturation.waste import gpu_hours_lost, is_wasteful


def test_idle_gpus_count_whole_and_busy_ones_by_their_distance_from_saturation():
    rows = [{"busy": 0.0, "score": 0.0}, {"busy": 0.9, "score": 75.0}, {"busy": 0.9, "score": 25.0},
            {"busy": 0.02, "score": 40.0}]  # the last is idle although it has a score: whole
    waste = gpu_hours_lost(2.0, 4, score=None, per_gpu=rows)
    assert waste.gpu_hours == 8.0
    assert waste.idle_gpu_hours == pytest.approx(4.0)
    assert waste.lost == pytest.approx(4.0 + 2 * 0.25 + 2 * 0.75)
    assert waste.unknown_gpus == 0 and waste.share == pytest.approx(6.0 / 8.0)


def test_gpus_without_a_score_lose_nothing_known_and_are_counted():
    rows = [{"busy": 0.8, "score": None}, {"busy": 0.8, "score": 50.0}]
    waste = gpu_hours_lost(1.0, 4, score=None, per_gpu=rows)  # two GPUs never reported
    assert waste.lost == pytest.approx(0.5) and waste.unknown_gpus == 3 and waste.share is None


def test_without_rows_the_job_score_is_spread_over_the_busy_gpus():
    # 8 GPUs, 2 idle (S about 0), job score 45: the 6 busy ones average 60.
    waste = gpu_hours_lost(10.0, 8, score=45.0, idle_gpus=2)
    assert waste.idle_gpu_hours == pytest.approx(20.0)
    assert waste.lost == pytest.approx(20.0 + 6 * 10.0 * 0.4)
    assert gpu_hours_lost(10.0, 8, score=None, idle_gpus=2).lost == pytest.approx(20.0)
    assert gpu_hours_lost(10.0, 8, score=float("nan"), idle_gpus=0).unknown_gpus == 8
    assert gpu_hours_lost(0, 8, score=10.0).lost == 0.0
    assert math.isclose(gpu_hours_lost(3.0, 4, score=100.0).lost, 0.0)


def test_wasteful_means_a_low_score_or_many_idle_gpus():
    assert is_wasteful(score=12.0, gpus=4, idle_gpus=0)
    assert is_wasteful(score=80.0, gpus=8, idle_gpus=2)
    assert not is_wasteful(score=80.0, gpus=8, idle_gpus=1)
    assert not is_wasteful(score=None, gpus=8, idle_gpus=0)
    assert not is_wasteful(score=55.0, gpus=0, idle_gpus=0, score_below=50.0)
    assert not is_wasteful(score=5.0, gpus=0, idle_gpus=0)  # no GPUs: nothing to waste
