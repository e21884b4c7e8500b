"""The truth about a job's data: what a source really delivered against the job's run time.

``coverage(...)`` compares the first and last sample a source holds for a job with the job's start,
end and state, and says in words what a user should know: data that starts late, stops early,
stopped arriving while the job runs, or never came. Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .numbers import clock, duration_words

LIVE, LAGGING, STALE, COMPLETE, ENDS_EARLY, NONE, WAITING = (
    "live", "lagging", "stale", "complete", "ends early", "none", "waiting")


@dataclass(frozen=True)
class Coverage:
    state: str  # one of the constants above
    words: str  # one sentence for the first screen
    starts_late: bool = False
    gap_start_s: float = 0.0  # data begins this long after the job started
    gap_end_s: float = 0.0  # data ends this long before the job ended (or before now while running)


def coverage(*, source: str, running: bool, start: datetime | None, end: datetime | None, first: datetime | None,
             last: datetime | None, now: datetime, step_s: float = 10.0, live_s: float = 360.0,
             stale_s: float = 900.0, reporting: int | None = None, expected: int | None = None) -> Coverage:
    """Classify ``source``'s data for a job.

    ``first``/``last``: the real first and last sample (or the end of the last bucket holding one).
    A running job is *live* while its newest sample is at most ``live_s`` old, *lagging* up to
    ``stale_s``, *stale* after. A finished job's data is *complete* unless it stops more than
    ``tolerance`` before the end (*ends early*). Either way a late start is said too.
    """
    if start is None:
        return Coverage(WAITING, f"{source}: the job has not started.")
    tolerance = max(2 * step_s, 300.0)
    if first is None or last is None:
        if running:
            return Coverage(NONE, f"{source}: no sample since the job started at {clock(start, now)} "
                                  f"({duration_words(now - start)} ago).")
        return Coverage(NONE, f"{source}: no sample stored for this job's nodes and run time.")
    who = ""
    if expected:
        who = f"{reporting or 0:,} of {expected:,} GPUs reporting, "
    late = (first - start).total_seconds()
    late_words = (f" Data starts at {clock(first, start)}, {duration_words(late)} after the job started."
                  if late > tolerance else "")
    span = f"{clock(first, start)}–{clock(last, start)}"
    if running:
        age = (now - last).total_seconds()
        if age <= live_s:
            return Coverage(LIVE, f"{source}: live — {who}last sample {clock(last, start)} "
                                  f"({duration_words(age)} ago), data {span}.{late_words}",
                            late > tolerance, max(late, 0.0), max(age, 0.0))
        state = LAGGING if age <= stale_s else STALE
        lead = "lagging" if state == LAGGING else "no data"
        return Coverage(state, f"{source}: {lead} since {clock(last, start)} ({duration_words(age)} ago) while the job runs; "
                               f"{who}data {span}.{late_words}", late > tolerance, max(late, 0.0), age)
    stop = end or now
    early = (stop - last).total_seconds()
    if early > tolerance:
        return Coverage(ENDS_EARLY, f"{source}: data stops at {clock(last, start)}, {duration_words(early)} before the job "
                                    f"ended at {clock(stop, start)} (what happened after is unknown, not zero); "
                                    f"{who}data {span}.{late_words}",
                        late > tolerance, max(late, 0.0), early)
    whole = "" if late_words else ", the job's whole run"
    return Coverage(COMPLETE, f"{source}: {who}data {span}{whole}.{late_words}", late > tolerance, max(late, 0.0),
                    max(early, 0.0))


def window_seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start) / timedelta(seconds=1)
