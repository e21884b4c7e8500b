"""Job.run_window: the one rule for "the time the job ran" (products, a job token's scope, filters during the job)."""
from datetime import datetime, timedelta, timezone

import pytest

from apps.jobs.models import Job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def job(state="RUNNING", *, submit=-3 * HOUR, start=-2 * HOUR, end=None, limit=None) -> Job:
    return Job(state=state, submit_time=None if submit is None else NOW + submit,
               start_time=None if start is None else NOW + start, end_time=None if end is None else NOW + end,
               time_limit_minutes=limit)


def test_a_running_job_runs_from_its_start_to_now():
    assert job().run_window(NOW) == (NOW - 2 * HOUR, NOW)
    assert job().run_window(NOW, open_end=True) == (NOW - 2 * HOUR, None)


def test_an_ended_job_runs_from_its_start_to_its_end():
    ended = job("COMPLETED", end=-HOUR)
    assert ended.run_window(NOW) == (NOW - 2 * HOUR, NOW - HOUR)
    assert ended.run_window(NOW, open_end=True) == (NOW - 2 * HOUR, NOW - HOUR)
    assert ended.run_window(NOW + 10 * HOUR) == (NOW - 2 * HOUR, NOW - HOUR)  # later reads do not move it


@pytest.mark.parametrize("pending", [
    job("PENDING", start=None),
    job("PENDING", start=HOUR),  # squeue's projected start
    job("PENDING", start=-HOUR),  # a projection that passed: still not started
    job("RUNNING", start=HOUR),  # a start after now (Slurm's clock ahead of ours)
    job("CANCELLED", start=None, end=-HOUR),  # cancelled while pending
])
def test_a_job_that_has_not_started_has_no_window(pending):
    assert pending.run_window(NOW) is None
    assert pending.run_window(NOW, open_end=True) is None


def test_a_job_not_started_counts_from_its_submission_for_a_token():
    assert job("PENDING", start=HOUR).run_window(NOW, from_submit=True) == (NOW - 3 * HOUR, NOW)
    assert job("PENDING", submit=None, start=None).run_window(NOW, from_submit=True) == (NOW, NOW)
    assert job().run_window(NOW, from_submit=True) == (NOW - 2 * HOUR, NOW)  # started: its start, not the submission


def test_slack_widens_both_ends():
    slack = timedelta(minutes=10)
    assert job("COMPLETED", end=-HOUR).run_window(NOW, slack=slack) == (NOW - 2 * HOUR - slack, NOW - HOUR + slack)
    assert job().run_window(NOW, slack=slack, open_end=True) == (NOW - 2 * HOUR - slack, None)


def test_the_time_limit_never_cuts_the_window():
    overtime = job(limit=60)  # a 60-minute limit, running for two hours (grace time, OverTimeLimit)
    assert overtime.run_window(NOW) == (NOW - 2 * HOUR, NOW)
    within = job(limit=24 * 60)  # the limit's projected end lies ahead: the window still ends now
    assert within.run_window(NOW) == (NOW - 2 * HOUR, NOW)
    assert job("TIMEOUT", end=-HOUR, limit=60).run_window(NOW) == (NOW - 2 * HOUR, NOW - HOUR)


def test_the_end_is_never_before_the_start():
    assert job("COMPLETED", start=-HOUR, end=-2 * HOUR).run_window(NOW) == (NOW - HOUR, NOW - HOUR)
    assert job("FAILED", start=-HOUR, end=-HOUR).run_window(NOW) == (NOW - HOUR, NOW - HOUR)  # failed at launch


def test_now_defaults_to_the_clock():
    window = job(start=-HOUR).run_window()
    assert window is not None and window[1] > window[0]
