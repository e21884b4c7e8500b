"""The score state (apps/saturation/state.py) and the finishing of a scoring from it, without Django:
columns scored in windows and spliced together equal the whole window scored at once; node blocks
concatenate into the whole job; bins an update keeps are the ones a full binning computes."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.saturation.products import STATE_ARRAYS, finish_scoring, score_columns
from apps.saturation.state import (
    CHUNK_COLUMNS, ScoreState, concatenate_blocks, load_columns, load_state, locked, save_columns, save_state,
)
from apps.telemetry.synthetic_jobs import job_chunks

START = datetime(2026, 11, 21, 8, 0, 3, tzinfo=timezone.utc)  # not on a bucket boundary
HOSTS = [f"nid{n:06d}" for n in range(1, 7)]
STEP = 10


def frames(seconds=3600, hosts=HOSTS, seed=4):
    return pd.concat(list(job_chunks("megatron", hosts, START, seconds, seed=seed)), ignore_index=True)


def window(frame, first_s, last_s):
    ts = pd.to_datetime(frame["ts"], utc=True)
    return frame[(ts >= pd.Timestamp(START) + pd.Timedelta(seconds=first_s)) & (ts < pd.Timestamp(START) + pd.Timedelta(seconds=last_s))]


def columns_of(frame, start, end):
    return score_columns([frame], start=start, end=end, step_s=STEP, hosts_order=HOSTS)


def assert_columns_equal(a, b):
    assert list(a.hosts) == list(b.hosts) and list(a.gpus) == list(b.gpus)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.counts, b.counts)
    for name in STATE_ARRAYS:
        assert np.array_equal(a.arrays[name], b.arrays[name], equal_nan=True), name


def test_windows_spliced_into_the_state_equal_the_whole_window(tmp_path):
    frame = frames()
    end = pd.Timestamp(START) + pd.Timedelta(seconds=3600)
    whole = columns_of(frame, START, end)
    cut = pd.Timestamp(START) + pd.Timedelta(seconds=2000)
    early = columns_of(window(frame, 0, 2000), START, cut)
    state = ScoreState.from_columns(early, fingerprint={"k": 1}, step_s=STEP, complete=len(early.times) - 1)
    save_state(tmp_path / "s", state)
    state = load_state(tmp_path / "s", upto=state.complete)
    first = state.complete
    read_from = pd.Timestamp(state.column_start_ns(first), tz="UTC")
    late = columns_of(window(frame, (read_from - pd.Timestamp(START)).total_seconds(), 3600), read_from, end)
    assert state.splice(first, late, HOSTS, complete=len(whole.times)) == 0
    assert_columns_equal(state.scored(), whole)
    save_state(tmp_path / "s", state, from_column=first)
    assert_columns_equal(load_state(tmp_path / "s").scored(), whole)


def test_the_new_columns_are_written_in_place_when_the_state_was_loaded_wide_enough(tmp_path):
    frame = frames(1800)
    end = pd.Timestamp(START) + pd.Timedelta(seconds=1800)
    whole = columns_of(frame, START, end)
    state = ScoreState.from_columns(whole, fingerprint={}, step_s=STEP, complete=100)
    save_state(tmp_path / "s", state)
    loaded = load_state(tmp_path / "s", upto=100, width=len(whole.times))
    kept = loaded.arrays["S"]
    read_from = pd.Timestamp(loaded.column_start_ns(100), tz="UTC")
    late = columns_of(window(frame, (read_from - pd.Timestamp(START)).total_seconds(), 1800), read_from, end)
    loaded.splice(100, late, HOSTS, complete=150)
    assert np.shares_memory(loaded.arrays["S"], kept)  # no copy of the old columns
    assert_columns_equal(loaded.scored(), whole)


def test_new_gpus_and_silent_gpus_in_a_window_are_placed_as_a_whole_scoring_places_them(tmp_path):
    frame = frames(1200)
    end = pd.Timestamp(START) + pd.Timedelta(seconds=1200)
    late_host, quiet_host = HOSTS[2], HOSTS[4]
    first_part = window(frame, 0, 600)
    first_part = first_part[first_part["host"] != late_host]  # joins later
    second_part = window(frame, 600 - 3, 1200)
    second_part = second_part[second_part["host"] != quiet_host]  # stops sending
    together = pd.concat([first_part, second_part])
    whole = columns_of(together, START, end)
    cut = pd.Timestamp(START) + pd.Timedelta(seconds=600 - 3)
    state = ScoreState.from_columns(columns_of(first_part, START, cut), fingerprint={}, step_s=STEP, complete=59)
    read_from = pd.Timestamp(state.column_start_ns(59), tz="UTC")
    late = columns_of(window(together, (read_from - pd.Timestamp(START)).total_seconds(), 1200), read_from, end)
    assert state.splice(59, late, HOSTS, complete=len(whole.times)) == 4
    assert_columns_equal(state.scored(), whole)
    assert finish_scoring(state.scored()).summary.score == finish_scoring(whole).summary.score


def test_node_blocks_concatenate_into_the_whole_job(tmp_path):
    frame = frames(900)
    end = pd.Timestamp(START) + pd.Timedelta(seconds=900)
    whole = columns_of(frame, START, end)
    paths = []
    for index, block in enumerate((HOSTS[:2], HOSTS[2:4], HOSTS[4:])):
        scored = score_columns([frame[frame["host"].isin(block)]], start=START, end=end, step_s=STEP, hosts_order=HOSTS)
        paths.append(tmp_path / f"block-{index}.npz")
        save_columns(paths[-1], scored)
    assert_columns_equal(concatenate_blocks([load_columns(path) for path in paths]), whole)


def test_an_update_keeps_the_final_bins_of_the_previous_product_and_nothing_else():
    frame = frames(3600)
    end = pd.Timestamp(START) + pd.Timedelta(seconds=3600)
    whole = columns_of(frame, START, end)
    count = len(whole.times)
    expected = finish_scoring(whole, bins=50)
    previous = finish_scoring(whole, bins=50, final_columns=200).cube
    per = count // 50 + 1  # 361 columns in at most 50 bins
    assert expected.cube.bin_seconds == per * STEP
    marked = {name: values.copy() for name, values in previous.values.items()}
    previous.values = {name: values + 1000 for name, values in marked.items()}  # so a kept bin shows
    again = finish_scoring(whole, bins=50, previous=previous, changed_from=300, final_columns=count).cube
    kept = 200 // per  # bins wholly before the previous product's final_until, not those before column 300
    assert np.allclose(again.values["S"][:, :kept], expected.cube.values["S"][:, :kept] + 1000, equal_nan=True)
    np.testing.assert_array_equal(again.values["S"][:, kept:], expected.cube.values["S"][:, kept:])
    assert again.final_until == whole.times[-1] + np.timedelta64(STEP, "s")
    # a product binned on other edges keeps nothing
    other = finish_scoring(whole, bins=40, final_columns=count).cube
    other.values = {name: values + 1000 for name, values in other.values.items()}
    np.testing.assert_array_equal(finish_scoring(whole, bins=50, previous=other, changed_from=300).cube.values["S"],
                                  expected.cube.values["S"])


def test_a_state_that_does_not_add_up_reads_as_none(tmp_path):
    frame = frames(1800)
    scored = columns_of(frame, START, pd.Timestamp(START) + pd.Timedelta(seconds=1800))
    state = ScoreState.from_columns(scored, fingerprint={"a": 1}, step_s=STEP, complete=170)
    save_state(tmp_path / "s", state)
    assert len(list((tmp_path / "s").glob("chunk-*.npy"))) == -(-len(scored.times) // CHUNK_COLUMNS)
    assert load_state(tmp_path / "missing") is None
    (tmp_path / "s" / "chunk-00001.npy").unlink()
    assert load_state(tmp_path / "s") is None
    assert load_state(tmp_path / "s", upto=CHUNK_COLUMNS) is not None  # the first chunk alone still reads


def test_the_lock_serialises_holders(tmp_path):
    with locked(tmp_path / "job.lock"):
        with pytest.raises(TimeoutError):
            with locked(tmp_path / "job.lock", timeout=0.2):
                pass
    with locked(tmp_path / "job.lock", timeout=0.2):
        pass
