"""The truth about a job's data: coverage and freshness words for the first screen (pure module)."""
from datetime import datetime, timedelta, timezone

import pytest

from apps.core.coverage import COMPLETE, ENDS_EARLY, LAGGING, LIVE, NONE, STALE, WAITING, coverage

T0 = datetime(2026, 11, 24, 14, 52, tzinfo=timezone.utc)


def minutes(n):
    return timedelta(minutes=n)


def test_finished_job_whose_data_covers_its_run_is_complete():
    found = coverage(source="GPU telemetry", running=False, start=T0, end=T0 + minutes(180), first=T0 + minutes(1),
                     last=T0 + minutes(179), now=T0 + minutes(240), reporting=512, expected=512)
    assert found.state == COMPLETE
    assert "512 of 512 GPUs reporting" in found.words and "14:53 UTC–17:51 UTC" in found.words
    assert not found.starts_late


def test_data_that_starts_late_says_when_it_starts():
    # The case: the job ran from 14:52, the store holds 18:04-21:04.
    found = coverage(source="GPU telemetry", running=False, start=T0, end=T0 + minutes(378),
                     first=T0 + minutes(192), last=T0 + minutes(372), now=T0 + minutes(400))
    assert found.starts_late
    assert "Data starts at 18:04 UTC, 3 h 12 min after the job started" in found.words
    assert "whole run" not in found.words


def test_finished_job_whose_data_stops_early_says_so():
    found = coverage(source="GPU telemetry", running=False, start=T0, end=T0 + minutes(180), first=T0,
                     last=T0 + minutes(135), now=T0 + minutes(200))
    assert found.state == ENDS_EARLY
    assert "45 min before the job ended" in found.words


def test_running_job_with_fresh_samples_is_live():
    now = T0 + minutes(60)
    found = coverage(source="GPU telemetry", running=True, start=T0, end=None, first=T0, last=now - minutes(2), now=now)
    assert found.state == LIVE and "2 min ago" in found.words


@pytest.mark.parametrize("age, state", [(8, LAGGING), (40, STALE)])
def test_running_job_whose_samples_stopped_is_lagging_then_stale(age, state):
    now = T0 + minutes(120)
    found = coverage(source="GPU telemetry", running=True, start=T0, end=None, first=T0, last=now - minutes(age), now=now)
    assert found.state == state
    assert f"{age} min ago" in found.words and "while the job runs" in found.words


def test_no_samples_running_and_finished():
    running = coverage(source="GPU telemetry", running=True, start=T0, end=None, first=None, last=None, now=T0 + minutes(30))
    finished = coverage(source="GPU telemetry", running=False, start=T0, end=T0 + minutes(10), first=None, last=None,
                        now=T0 + minutes(30))
    assert running.state == finished.state == NONE
    assert "no sample since the job started at 14:52 UTC (30 min ago)" in running.words
    assert "no sample stored" in finished.words


def test_pending_job_waits():
    assert coverage(source="x", running=True, start=None, end=None, first=None, last=None, now=T0).state == WAITING
