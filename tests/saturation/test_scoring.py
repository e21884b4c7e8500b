"""The saturation score on synthetic traces whose answers are worked out by hand."""
import numpy as np
import pytest

from apps.saturation.scoring import DEFAULT_MODEL, MODELS, diagnose, model_for, score, steady_state, summarize

T = 60  # samples


BASE = {1001: 0.98, 1002: 0.95, 1003: 0.4, 203: 100, 100: 1950, 113: 1980}


def run(fields, model=DEFAULT_MODEL, power=None):
    values = {**{k: np.full((2, T), v, dtype=float) for k, v in BASE.items()},
              **{k: np.broadcast_to(np.asarray(v, dtype=float), (2, T)).copy() for k, v in fields.items()}}
    scores = score(values, model)
    return scores, summarize(scores, interval_s=10, power_w=power)


def test_compute_bound_limited_by_the_tensor_cores():
    scores, summary = run({1004: 0.9, 1005: 0.3, 1007: 0.1, 1011: 50e9})
    assert np.allclose(scores.S, 0.9 / 0.93) and np.allclose(scores.C, 0.9 / 0.93)
    assert np.allclose(scores.M, 0.3 / 0.8) and np.allclose(scores.L, 50e9 / (450e9 * 0.9))
    assert set(scores.limiter_names().ravel()) == {"tensor"}
    assert summary.score == pytest.approx(100 * 0.9 / 0.93, abs=0.05) and summary.limiter == "tensor"
    assert summary.labels == ["compute-saturated (tensor)"] and summary.limiter_words == "tensor cores"


def test_memory_bound_limited_by_dram():
    scores, summary = run({1004: 0.1, 1005: 0.78})
    assert np.allclose(scores.S, 0.975) and summary.limiter == "dram"
    assert summary.labels == ["memory-bandwidth-saturated"]


def test_link_bound_each_direction_against_its_own_peak():
    scores, summary = run({1004: 0.2, 1005: 0.2, 1011: 100e9, 1012: 400e9, 1009: 1e9})
    assert np.allclose(scores.L, 400e9 / (450e9 * 0.9)) and summary.limiter == "nvlink"
    assert summary.labels == ["communication-saturated (nvlink)"]
    pcie, _ = run({1004: 0.05, 1009: 60e9})
    assert np.allclose(pcie.S, min(1.0, 60e9 / (63e9 * 0.9))) and set(pcie.limiter_names().ravel()) == {"pcie"}


def test_idle_gpus_are_idle_not_low():
    scores, summary = run({1001: 0.0, 203: 0, 1002: 0.0, 1004: 0.0, 1005: 0.01})
    assert summary.idle_gpus == 2 and summary.labels[0] == "2 idle GPUs"
    assert all(g.labels == ["idle"] for g in summary.gpus)


def test_under_filled_gpu():
    _, summary = run({1001: 0.9, 1002: 0.3, 1004: 0.1, 1005: 0.1})
    assert summary.gpus[0].labels == ["under-filled: too few blocks or small kernels"]


def test_the_trap_full_utilisation_with_low_saturation():
    """GPU_UTIL says 100 %; the busiest unit runs at ~20 %: latency-bound, not 'fully used'."""
    scores, summary = run({203: 100, 1001: 0.99, 1002: 0.92, 1003: 0.15, 1004: 0.15, 1005: 0.16, 1007: 0.12})
    assert np.allclose(scores.S, 0.2) and summary.score == pytest.approx(20.0, abs=0.05)
    assert summary.gpus[0].labels == ["latency-bound, low occupancy"]
    assert summary.labels == ["latency-bound, low occupancy"]


def test_clock_limited_and_fp32_hint():
    values = {1004: 0.05, 1007: 0.7, 100: 1500, 112: 0x4}
    _, summary = run(values)
    assert summary.gpus[0].labels == ["clock-limited (power/thermal)", "compute-saturated (fp32): FP32 pipes, not tensor cores"]


def test_steady_state_trims_warm_up_and_tail_and_energy_at_low_saturation():
    busy = np.full((2, T), 0.95)
    busy[:, :10] = 0.1
    busy[:, -5:] = 0.2
    assert steady_state(busy) == slice(10, T - 5)
    tensor = np.full((2, T), 0.9)
    tensor[:, 20:30] = 0.1  # a dip inside the steady state: S < 0.3 there
    power = np.full((2, T), 500.0)
    _, summary = run({1001: busy, 1004: tensor, 1005: 0.1}, power=power)
    assert summary.window == slice(10, T - 5)
    assert summary.energy_j == pytest.approx(2 * (T - 15) * 500 * 10)
    assert summary.energy_low_j == pytest.approx(2 * 10 * 500 * 10)


def test_imbalance_and_missing_fields():
    tensor = np.full((2, T), 0.9)
    tensor[1] = 0.45
    _, summary = run({1004: tensor})
    assert summary.imbalance == pytest.approx((0.9 / 0.93 - 0.45 / 0.93) / (0.675 / 0.93), rel=1e-6)
    nothing = score({1001: np.full((1, 3), 0.9)})
    assert np.isnan(nothing.S).all() and (nothing.limiter == -1).all()


def test_models_are_chosen_by_device_name_and_can_be_overridden():
    assert model_for("NVIDIA H100 80GB HBM3").name == "H100 SXM" and model_for("NVIDIA GH200 120GB").name == "GH200"
    assert model_for(None) is DEFAULT_MODEL
    calibrated = MODELS["GH200"].with_overrides(ceilings={"tensor": 0.9})
    scores, _ = run({1004: 0.9}, model=calibrated)
    assert np.allclose(scores.S, 1.0)


def test_diagnose_bands():
    assert diagnose(0.45, "dram", 0.9, 0.6, 0.4, 1.0, 0.0) == ["moderate saturation"]
    assert diagnose(float("nan"), "", 0.9, float("nan"), float("nan"), float("nan"), 0.0) == ["no data"]


def test_row_percentiles_agree_with_numpy_and_handle_empty_rows():
    from apps.saturation.scoring import _row_percentiles

    rng = np.random.default_rng(2)
    data = rng.random((6, 37))
    data[1, ::3] = np.nan
    data[4] = np.nan
    ours = _row_percentiles(data)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        theirs = np.nanpercentile(data, [10, 50, 90], axis=1)
    assert np.allclose(ours, theirs, equal_nan=True)


def test_bucket_means_carry_throttling_as_shares_of_time():
    _, summary = run({1004: 0.2, 100: 1500, 112: 0})
    assert summary.gpus[0].throttled == 0 and "clock-limited (power/thermal)" not in summary.gpus[0].labels
    values = {**{k: np.full((2, T), v, dtype=float) for k, v in BASE.items()}, 1004: np.full((2, T), 0.2), 100: np.full((2, T), 1500.0)}
    scores = score(values, throttle=(np.full((2, T), 0.4), np.zeros((2, T))))
    summary = summarize(scores, interval_s=10)
    assert summary.gpus[0].throttled == pytest.approx(0.4) and summary.gpus[0].labels[0] == "clock-limited (power/thermal)"
