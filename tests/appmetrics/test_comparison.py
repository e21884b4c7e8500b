"""apps.appmetrics.comparison: which facts of compared jobs differ; strong and weak scaling efficiency.

Efficiency = tokens/s per GPU of a run / tokens/s per GPU of the smallest run (for strong scaling this equals
speedup / (gpus / base gpus)). The numbers below are worked out in the comments.
"""
import pytest

from apps.appmetrics.comparison import differences, scaling


def test_differences_per_key():
    rows = [
        {"gpus": 512, "tp": 4, "model": "70b", "mfu": 0.325, "nodes": ["a", "b"], "swiglu": True},
        {"gpus": 512, "tp": 8, "model": "70b", "mfu": 0.325 * (1 + 1e-12), "nodes": ["a", "c"], "swiglu": 1},
        {"gpus": 512.0, "tp": 4, "model": "70b", "mfu": 0.325, "nodes": ["a", "b"], "swiglu": True},
    ]
    assert differences(rows, ["gpus", "tp", "model", "mfu", "nodes", "swiglu", "absent"]) == {
        "gpus": False,  # 512 and 512.0 are the same number
        "tp": True,
        "model": False,
        "mfu": False,  # within the relative tolerance of 1e-9
        "nodes": True,
        "swiglu": True,  # True is not 1
        "absent": False,  # missing everywhere: the same (None)
    }


def test_differences_missing_in_one_row_differs_and_tolerance_is_adjustable():
    rows = [{"mfu": 0.30, "energy": 1.2}, {"mfu": 0.31}]
    assert differences(rows, ["mfu", "energy"]) == {"mfu": True, "energy": True}
    assert differences(rows, ["mfu"], rel_tol=0.05) == {"mfu": False}


def test_differences_of_fewer_than_two_rows():
    assert differences([{"a": 1}], ["a"]) == {"a": False}
    assert differences([], ["a"]) == {"a": False}


def test_strong_scaling_32_to_512_gpus_at_80_percent():
    # baseline: 32 GPUs at 1,000 tokens/s/GPU = 32,000 tokens/s, global batch 1024
    # 512 GPUs, same batch, 800 tokens/s/GPU = 409,600 tokens/s: speedup 409,600 / 32,000 = 12.8 of an ideal
    # 512 / 32 = 16 -> efficiency 12.8 / 16 = 0.8 = 800 / 1000
    # 128 GPUs at 900 tokens/s/GPU = 115,200 tokens/s: speedup 3.6 of 4 -> 0.9
    runs = [
        {"job": "alps/3", "gpus": 512, "tokens_per_s": 409_600, "global_batch": 1024},
        {"job": "alps/1", "gpus": 32, "tokens_per_s": 32_000, "global_batch": 1024},
        {"job": "alps/2", "gpus": 128, "tokens_per_s": 115_200, "global_batch": 1024},
    ]
    result = scaling(runs)
    assert [run["job"] for run in result] == ["alps/1", "alps/2", "alps/3"]  # by GPU count
    base, middle, large = result
    assert (base["kind"], base["speedup"], base["efficiency"], base["tokens_per_s_per_gpu"]) == (
        "baseline", 1.0, 1.0, 1000.0)
    assert middle["kind"] == "strong"
    assert middle["tokens_per_s_per_gpu"] == pytest.approx(900)
    assert middle["speedup"] == pytest.approx(3.6)
    assert middle["efficiency"] == pytest.approx(0.9)
    assert large["kind"] == "strong"
    assert large["speedup"] == pytest.approx(12.8)
    assert large["ideal_speedup"] == 16
    assert large["efficiency"] == pytest.approx(0.8)
    assert large["job"] == "alps/3"  # the run's own keys are kept


def test_weak_scaling_when_the_batch_grows():
    # baseline 64 GPUs, batch 256, 1,200 tokens/s/GPU = 76,800 tokens/s
    # 256 GPUs, batch 1024 (4x): 1,140 tokens/s/GPU = 291,840 tokens/s -> efficiency 1140 / 1200 = 0.95,
    # speedup 291,840 / 76,800 = 3.8
    result = scaling([{"gpus": 64, "tokens_per_s": 76_800, "global_batch": 256},
                      {"gpus": 256, "tokens_per_s": 291_840, "global_batch": 1024}])
    assert result[1]["kind"] == "weak"
    assert result[1]["efficiency"] == pytest.approx(0.95)
    assert result[1]["speedup"] == pytest.approx(3.8)


def test_runs_without_throughput_or_batch():
    # the 16-GPU run has no throughput: the baseline is the 32-GPU one
    result = scaling([{"gpus": 16, "tokens_per_s": None, "global_batch": 512},
                      {"gpus": 32, "tokens_per_s": 32_000, "global_batch": 512},
                      {"gpus": 64, "tokens_per_s": 56_000}])
    missing, base, unknown_batch = result
    assert (missing["tokens_per_s_per_gpu"], missing["speedup"], missing["efficiency"], missing["kind"]) == (
        None, None, None, None)
    assert base["kind"] == "baseline"
    # 56,000 / 64 = 875 per GPU vs 1,000: 0.875; kind unknown without the batch
    assert unknown_batch["efficiency"] == pytest.approx(0.875)
    assert unknown_batch["kind"] is None
    assert scaling([]) == []
    assert scaling([{"gpus": 8}])[0]["efficiency"] is None


@pytest.mark.parametrize("runs, message", [
    ([{"tokens_per_s": 1.0}], "run 1 has no gpus"),
    ([{"gpus": 8, "tokens_per_s": 1.0}, {"gpus": 0, "tokens_per_s": 1.0}], "run 2 has gpus 0"),
    ([{"gpus": 8.5, "tokens_per_s": 1.0}], "run 1 has gpus 8.5, not a whole number"),
    ([{"gpus": 8, "tokens_per_s": -3}], "run 1 has tokens_per_s -3"),
    ([{"gpus": 8, "tokens_per_s": float("inf")}], "run 1 has tokens_per_s inf"),
    ([{"gpus": 8, "tokens_per_s": 1.0, "global_batch": "big"}], "run 1 has global_batch 'big'"),
    (["8 GPUs"], "run 1 is str"),
])
def test_bad_runs_are_named(runs, message):
    with pytest.raises(ValueError, match=message):
        scaling(runs)
