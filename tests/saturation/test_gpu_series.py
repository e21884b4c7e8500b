"""apps/saturation/gpu_series.py on hand-made products: which GPUs are peers, and the band they make."""
import numpy as np

from apps.saturation.gpu_series import gpu_series, rounded, window_columns

TIMES = np.datetime64("2025-03-01T10:00:00", "ns") + np.arange(12) * np.timedelta64(10, "s")


def _layout(pp=2, tp=2, dp=5):
    """Megatron order tp, dp, pp: rank = tp + TP*dp + TP*DP*pp, four GPUs a node."""
    gpus = []
    for rank in range(pp * tp * dp):
        gpus.append({"host": f"nid{rank // 4:06d}", "gpu": rank % 4, "rank": rank,
                     "tp": rank % tp, "dp": rank // tp % dp, "pp": rank // (tp * dp)})
    return gpus


def test_peers_are_the_same_stage_and_lane_in_the_other_replicas():
    per_gpu = _layout()
    values = np.array([[100.0 * (1 + g["pp"] * 2 + g["tp"])] * 12 for g in per_gpu])  # each (stage, lane) its own level
    chosen = next(i for i, g in enumerate(per_gpu) if (g["pp"], g["tp"], g["dp"]) == (1, 0, 2))
    values[chosen] *= 0.5
    peers_rows = [i for i, g in enumerate(per_gpu) if (g["pp"], g["tp"]) == (1, 0) and i != chosen]
    values[peers_rows[0]] = 290.0  # spread inside the group, so the band is not a single value
    series = gpu_series(values, TIMES, 10.0, per_gpu, [chosen], bins=12)
    assert series.peers == 4 and "same pipeline stage and tensor lane" in series.description
    assert np.allclose(series.median, 300.0) and np.allclose(series.p10, 293.0) and np.allclose(series.p90, 300.0)
    assert np.allclose(series.values[0], 150.0)


def test_idle_gpus_and_the_chosen_ones_are_not_peers():
    per_gpu = [{"host": "nid000001", "gpu": g, "rank": None} for g in range(8)]
    values = np.full((8, 12), 0.6)
    values[5] = 0.0  # idle: would drag the band down
    values[[0, 1]] = 0.2
    busy = np.full((8, 12), 0.9)
    busy[5] = 0.0
    series = gpu_series(values, TIMES, 10.0, per_gpu, [0, 1], busy=busy, steady=np.ones(12, bool), bins=12)
    assert series.peers == 5 and np.allclose(series.p10, 0.6)
    assert "1 idle GPU left out" in series.description and "the GPUs shown" in series.description
    assert "all 8 GPUs of the job" in series.description and "nid000001:0" in series.description


def test_too_few_peers_reporting_leave_the_band_empty():
    per_gpu = [{"host": "nid000001", "gpu": g, "rank": g} for g in range(6)]
    values = np.full((6, 12), 0.5)
    values[3:, :6] = np.nan  # only 2 peers report in the first half
    series = gpu_series(values, TIMES, 10.0, per_gpu, [0], bins=12)
    assert np.isnan(series.median[:6]).all() and np.allclose(series.median[6:], 0.5)
    few = gpu_series(values[:4], TIMES, 10.0, per_gpu[:4], [0], bins=12)
    assert few.peers == 3 and np.isnan(few.p10).all() and "fewer than 4 peers, so no band" in few.description


def test_a_window_then_at_most_bins_columns():
    per_gpu = [{"host": "nid000001", "gpu": g, "rank": g} for g in range(5)]
    values = np.tile(np.arange(12, dtype=float), (5, 1))
    series = gpu_series(values, TIMES, 10.0, per_gpu, [2], bins=2, start=TIMES[3] + np.timedelta64(5, "s"), end=TIMES[9])
    assert list(series.times) == [TIMES[3], TIMES[6]] and series.bin_seconds == 30.0  # bins 3..8, overlapping the window
    assert np.allclose(series.values[0], [4.0, 7.0]) and np.allclose(series.median, [4.0, 7.0])
    assert window_columns(TIMES, 10.0, start=TIMES[-1] + np.timedelta64(10, "s")).sum() == 0


def test_values_at_the_metric_resolution():
    assert rounded(np.array([0.12345, np.nan]), 0.001) == [0.123, None]
    assert rounded(np.array([1390.4]), 1.0) == [1390.0]
    assert rounded(np.array([412.345]), 0.1) == [412.3]
