"""The window of a job's own writes and the cap on a grid's buckets (apps.core.timebounds, plain: no Django), and the
Lustre rates grid that keeps under the cap whatever its readings' span (issue 33, finding 2)."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.core.timebounds import MAX_BUCKETS, capped_step, step_note, write_window
from apps.telemetry.lustre import io_step, job_io

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
MARGIN = timedelta(minutes=10)


def window(**job):
    return write_window(**{"pending": False, "start": None, "end": None, "submit": None, "now": NOW, "margin": MARGIN, **job})


def test_an_ended_job_writes_within_its_run_time_and_the_margin():
    ran = window(start=NOW - timedelta(hours=5), end=NOW - timedelta(hours=2))
    assert (ran.start, ran.end) == (NOW - timedelta(hours=5) - MARGIN, NOW - timedelta(hours=2) + MARGIN)
    assert NOW - timedelta(hours=2) + MARGIN in ran and NOW - timedelta(hours=1) not in ran


def test_a_running_job_s_window_ends_at_now_plus_the_margin_even_with_a_projected_end():
    for end in (None, NOW + timedelta(days=1)):  # Slurm's end of a running job is its time limit: a projection
        running = window(start=NOW - timedelta(hours=1), end=end)
        assert (running.start, running.end) == (NOW - timedelta(hours=1) - MARGIN, NOW + MARGIN)
        assert "until now" in running.basis


def test_a_pending_job_writes_from_its_submission_to_now_plus_the_margin():
    waiting = window(pending=True, start=NOW + timedelta(hours=3), submit=NOW - timedelta(minutes=30))
    assert (waiting.start, waiting.end) == (NOW - timedelta(minutes=30) - MARGIN, NOW + MARGIN)
    assert "pending" in waiting.basis
    # a start after now without an end is squeue's projection: pending too; no submission time: now
    projected = window(start=NOW + timedelta(hours=3))
    assert (projected.start, projected.end) == (NOW - MARGIN, NOW + MARGIN)


def test_a_refusal_names_the_field_the_time_and_the_window():
    ran = window(start=datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc), end=datetime(2026, 5, 1, 11, 0, tzinfo=timezone.utc))
    assert ran.refusal(datetime(2026, 5, 1, 10, 30, tzinfo=timezone.utc), "ts") is None
    assert ran.refusal(datetime(2100, 1, 1, tzinfo=timezone.utc), "rows[3].ts") == (
        "rows[3].ts: 2100-01-01T00:00:00Z is outside the job's write window 2026-05-01T09:50:00Z – 2026-05-01T11:10:00Z "
        "(the job's run time ± 10 min)")
    with pytest.raises(ValueError, match="negative"):
        window(start=NOW, margin=-MARGIN)


def test_the_step_grows_so_a_grid_keeps_at_most_the_cap_whatever_the_span_or_the_step_asked():
    century = (datetime(2100, 1, 1) - datetime(2000, 1, 1)).total_seconds()
    assert capped_step(3600.0, 30.0) == 30.0  # an hour at 30 s: as asked
    for asked in (1.0, 30.0, 86_400.0):
        used = capped_step(century, asked)
        assert used >= asked and century / used + 1 <= MAX_BUCKETS
    assert capped_step(century, 10.0 * century) == 10.0 * century
    assert step_note(30, capped_step(century, 30.0)).startswith("step raised from 30 s to 157,796 s")
    assert step_note(30, 30) == ""
    with pytest.raises(ValueError):
        capped_step(10.0, 0.0)


def _readings(*moments: str) -> pd.DataFrame:
    ts = pd.to_datetime(list(moments), utc=True)
    return pd.DataFrame({"ts": ts, "cluster": "alps", "job_id": 7, "name": "lustre/s-OST0000/write_bytes",
                         "step": pd.array([None] * len(ts), dtype="Int64"), "value": np.arange(len(ts), dtype=float) * 1e9})


def test_lustre_rates_over_readings_a_year_apart_keep_under_the_cap():
    # before the cap: a 30-s grid of 1,051,200 buckets (readings dated 2000 and 2100 gave 105 million: 16.8 GB)
    frame = _readings("2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    step = io_step(frame, 30)
    assert step > 30
    rates = job_io(frame, 30)
    assert 0 < len(rates) <= MAX_BUCKETS
    assert len(job_io(frame, step)) == len(rates)  # the step a caller states is the one the grid used
    near = _readings("2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z")
    assert io_step(near, 30) == 30 and len(job_io(near, 30)) == 20  # a normal span keeps its step
