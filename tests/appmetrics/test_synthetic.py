"""The demo's synthetic application series: the same run as the synthetic GPU telemetry (checkpoint dips inside the
GPUs' idle windows, the straggler's onset where the throttled GPU starts throttling, evaluation where the telemetry
evaluates), deterministic per window, and a strong-scaling series that falls off as planted."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.appmetrics import events, synthetic
from apps.telemetry.synthetic_jobs import POWER_CAP_BIT, Planted, default_planted, job_chunks, straggler_onset_s

HOSTS = [f"nid{i:06d}" for i in range(1000, 1006)]
RUN_START = datetime(2026, 3, 2, 6, 0, tzinfo=timezone.utc)
BEFORE_S = 2 * 3600.0  # the telemetry window starts two hours into the run
WINDOW_S = 2 * 3600.0


def telemetry(planted: Planted, before_s: float = BEFORE_S, window_s: float = WINDOW_S) -> pd.DataFrame:
    start = RUN_START + timedelta(seconds=before_s)
    return pd.concat(job_chunks("megatron", HOSTS, start, window_s, seed=3, planted=planted, elapsed_before_s=before_s))


def idle_times(frame: pd.DataFrame) -> pd.Series:
    """Telemetry samples where every GPU's SMs are (nearly) idle: the checkpoints."""
    sm = frame[frame["field"] == 1002].groupby("ts")["value"].max()
    return pd.Series(sm.index[sm < 0.3])


def run(**changes) -> synthetic.Run:
    return synthetic.Run(start=RUN_START, global_batch=320, seq_len=4096, seed=5, **changes)


def series(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    return frame[frame["name"] == name].reset_index(drop=True)


def test_checkpoint_dips_fall_inside_the_telemetrys_idle_windows():
    gpus = telemetry(Planted())
    idle = idle_times(gpus)
    window = (RUN_START + timedelta(seconds=BEFORE_S), RUN_START + timedelta(seconds=BEFORE_S + WINDOW_S))
    # rows are (start, end], telemetry windows [start, end): this window begins on a checkpoint
    rows = synthetic.rows(run(), start=window[0] - timedelta(seconds=1), end=window[1] - timedelta(seconds=1))
    markers = series(rows, "event.checkpoint")
    # four checkpoints in two hours of the telemetry, each idle for 90 s, each with its marker at the start
    idle_starts = idle[idle.diff().dt.total_seconds().fillna(1e9) > 60].tolist()
    assert len(idle_starts) == 4
    assert markers["ts"].tolist() == idle_starts
    assert (markers["value"] == 90).all()
    # the markers come every ~250 iterations
    assert np.all(np.abs(np.diff(markers["step"].astype(int)) - 250) <= 5)
    tokens = series(rows, "tokens_per_s")
    iteration = series(rows, "iteration_s")
    low = tokens["value"] < 0.7 * tokens["value"].median()
    assert low.sum() == 4  # one logged interval per checkpoint, and no other dip
    for ts, seconds in zip(tokens.loc[low, "ts"], iteration.loc[low, "value"]):
        interval_start = ts - pd.Timedelta(seconds=10 * seconds)
        inside = idle[(idle > interval_start) & (idle <= ts)]
        assert len(inside) >= 8, f"the dip logged at {ts} spans no idle window of the telemetry"


def test_the_straggler_onset_is_where_the_throttled_gpu_starts_throttling_and_throughput_drops():
    onset = straggler_onset_s(BEFORE_S, WINDOW_S)
    assert onset == BEFORE_S + 2400  # a third of a two-hour window
    planted = default_planted(HOSTS, throttled_after_s=onset)
    gpus = telemetry(planted)
    host, gpu = planted.throttled
    bits = gpus[(gpus["host"] == host) & (gpus["gpu"] == gpu) & (gpus["field"] == 112)]
    capped = bits.loc[(bits["value"].astype(int) & POWER_CAP_BIT) > 0, "ts"]
    onset_at = RUN_START + timedelta(seconds=onset)
    assert capped.min() >= onset_at and capped.min() - onset_at <= timedelta(seconds=10)
    rows = synthetic.rows(run(straggler_after_s=onset), start=RUN_START + timedelta(seconds=BEFORE_S),
                          end=RUN_START + timedelta(seconds=BEFORE_S + WINDOW_S))
    tokens = series(rows, "tokens_per_s")
    before = tokens.loc[tokens["ts"] < onset_at, "value"].median()
    after = tokens.loc[tokens["ts"] > onset_at + timedelta(minutes=3), "value"].median()
    assert 0.12 <= 1 - after / before <= 0.16


def test_an_onset_at_the_start_is_the_straggler_throughout():
    """The optional onset keeps today's behaviour when not given: an onset before the window changes nothing."""
    throttled = default_planted(HOSTS)
    always, from_zero = telemetry(throttled), telemetry(default_planted(HOSTS, throttled_after_s=0.0))
    pd.testing.assert_frame_equal(always.reset_index(drop=True), from_zero.reset_index(drop=True))
    later = telemetry(default_planted(HOSTS, throttled_after_s=BEFORE_S + 3600))
    assert not always.reset_index(drop=True).equals(later.reset_index(drop=True))


def test_the_evaluation_is_where_the_telemetry_evaluates():
    """The telemetry evaluates in the last 15 minutes of a window of an hour or more: the application holds its
    iteration there, marks it and logs a validation loss at its end."""
    evaluation_at = BEFORE_S + WINDOW_S - 900
    gpus = telemetry(Planted())
    dram = gpus[gpus["field"] == 1005].groupby("ts")["value"].mean()
    eval_from = RUN_START + timedelta(seconds=evaluation_at)
    assert dram[dram.index >= eval_from].mean() > 1.3 * dram[dram.index < eval_from].median()
    rows = synthetic.rows(run(evaluation_at_s=evaluation_at), end=RUN_START + timedelta(seconds=BEFORE_S + WINDOW_S + 600))
    marker = series(rows, "event.evaluation")
    assert marker["ts"].tolist() == [eval_from] and marker["value"].tolist() == [900.0]
    tokens = series(rows, "tokens_per_s")
    assert not ((tokens["ts"] > eval_from) & (tokens["ts"] < eval_from + timedelta(seconds=900))).any()
    assert series(rows, "eval_loss")["ts"].tolist() == [eval_from + timedelta(seconds=900)]


def test_any_window_gives_the_same_rows_at_the_same_steps():
    whole = synthetic.rows(run(straggler_after_s=9000), end=RUN_START + timedelta(hours=4))
    ticks = pd.concat([synthetic.rows(run(straggler_after_s=9000), start=RUN_START + timedelta(minutes=m),
                                      end=RUN_START + timedelta(minutes=m + 7)) for m in range(0, 240, 7)])
    ticks = ticks[ticks["ts"] <= RUN_START + timedelta(hours=4)].sort_values(["name", "ts"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), ticks, check_dtype=False)


def test_training_curves_look_like_training():
    rows = synthetic.rows(run(), end=RUN_START + timedelta(hours=6))
    loss = series(rows, "loss")["value"].to_numpy()
    assert loss[0] > 9.5 and loss[-1] < 4 and loss[:20].mean() > loss[-20:].mean()
    lr = series(rows, "lr")
    steps = lr["step"].astype(int).to_numpy()
    peak = lr["value"].to_numpy()[steps <= 500].max()
    assert np.all(np.diff(lr["value"].to_numpy()[steps <= 500]) > 0)  # linear warm-up
    assert np.all(np.diff(lr["value"].to_numpy()[steps > 500]) <= 0) and peak == pytest.approx(1.5e-4, rel=0.03)
    assert (series(rows, "iteration_s")["step"].astype(int) % 10 == 0).all()
    assert series(rows, "iteration_s")["value"].median() == pytest.approx(6.84, rel=0.02)


def test_events_find_the_checkpoints_every_half_hour_and_the_straggler_at_its_onset():
    """events.find_events on the synthetic series with the application's markers and a straggler finding at the
    onset (what the saturation detector reports): a checkpoint every 30 minutes, then the straggler."""
    onset = 4 * 3600 + 600.0  # 10 min after the 4 h checkpoint, data up to just before the next: no checkpoint in its dip
    end = RUN_START + timedelta(seconds=onset + 1080)
    rows = synthetic.rows(run(straggler_after_s=onset), end=end)
    tokens = series(rows, "tokens_per_s")
    markers = [{"name": name, "ts": ts, "value": value} for name, ts, value in
               zip(rows["name"], rows["ts"], rows["value"]) if name.startswith("event.")]
    onset_at = RUN_START + timedelta(seconds=onset)
    evidence = events.Evidence(times=np.array([], dtype="datetime64[ns]"), step_s=60.0, markers=markers,
                               stragglers=[{"label": "nid001002 GPU 2", "start": onset_at, "reason": "SM clock 28 % low"}])
    found = events.find_events(tokens["ts"], tokens["value"], evidence)
    kinds = [event["kind"] for event in found]
    assert kinds == ["checkpoint"] * 8 + ["straggler"]
    starts = [event["start"] for event in found[:8]]
    assert all(timedelta(minutes=29) <= b - a <= timedelta(minutes=31) for a, b in zip(starts, starts[1:]))
    straggler = found[-1]
    assert abs(straggler["start"] - onset_at) < timedelta(minutes=3) and straggler["end"] is None
    assert 0.10 <= straggler["dip"] <= 0.18


def test_strong_scaling_runs_fall_off_as_planted():
    per_gpu = {}
    for gpus, efficiency in {32: 1.0, 512: 0.8}.items():
        seconds = synthetic.scaling_iteration_s(gpus, 32, 7600.0, efficiency, 1024, 4096)
        rows = synthetic.rows(synthetic.Run(start=RUN_START, global_batch=1024, seq_len=4096, iteration_s=seconds, checkpoints=False,
                                            startup_s=120.0), end=RUN_START + timedelta(minutes=20))
        per_gpu[gpus] = series(rows, "tokens_per_s")["value"].median() / gpus
    assert per_gpu[32] == pytest.approx(7600, rel=0.02)
    assert per_gpu[512] / per_gpu[32] == pytest.approx(0.8, rel=0.02)
    with pytest.raises(ValueError, match="efficiency"):
        synthetic.scaling_iteration_s(64, 32, 7600.0, 1.5, 1024, 4096)
