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
            # No "live" here: whether data this old may be called live is the badge's to say (:func:`badge`).
            return Coverage(LIVE, f"{source}: {who}last sample {clock(last, start)} "
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


# A source is shown "live" only while its newest sample is at most this many of the page's refresh intervals old
# (JOB_PAGE_LIVE_SECONDS, 30 s: 90 s). A source's *state* stays live longer (a product re-read every 5 minutes is not
# lagging), but a badge saying "live" over data minutes old misleads: it says "updated 4 min ago" instead.
# Never under a minute: a collector that posts every minute is live between its posts whatever the page's pace.
LIVE_INTERVALS, LIVE_MIN_S = 3, 60.0


@dataclass(frozen=True)
class Badge:
    text: str  # "live", "updated 4 min ago", "lagging", "complete", ...
    level: str  # the status class: ok, info, warn or fail


def badge(state: str, last: datetime | None, now: datetime, refresh_s: float) -> Badge:
    """The badge beside a source's freshness: "live" only while its newest sample (``last``) is at most
    ``LIVE_INTERVALS`` refresh intervals (``refresh_s``, the page's; at least ``LIVE_MIN_S``) old at ``now``; an older one of a source whose
    state is still live reads "updated N min ago". Other states are said as they are."""
    if state == LIVE:
        age = (now - last).total_seconds() if last is not None else None
        if age is not None and age > max(LIVE_INTERVALS * refresh_s, LIVE_MIN_S):
            return Badge(f"updated {duration_words(age)} ago", "info")
        return Badge(LIVE, "ok")
    level = {COMPLETE: "ok", NONE: "fail", STALE: "fail"}.get(state, "warn")
    return Badge(state, level)


def window_seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start) / timedelta(seconds=1)
