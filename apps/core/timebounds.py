"""Bounds in time: the window a job's own writes must fall in, and the most buckets a grid over time may have.

Plain Python: no Django. The jobs app turns a job into a :class:`WriteWindow` (``Job.write_window``, the margin
from the ``JOB_WRITE_MARGIN_MINUTES`` setting); every endpoint a job token may write refuses (400 naming the field
and the window) or drops (with a message in the answer) what falls outside it. Every grid, series and figure over
time takes its step from :func:`capped_step`, so its number of buckets stays at most a cap whatever the data's span
or the step a caller asks for: two readings dated 2000 and 2100 give a coarse grid, not 100 million buckets.

**The window rule** (:func:`write_window`):

* a job that started (a start time, not pending): from its start to its end, or to ``now`` while it has not ended
  (an end time still in the future is Slurm's projection, not an end), each widened by ``margin``: a running job's
  window ends at ``now + margin``;
* a pending job (or one whose start is a projection, after ``now``): from its submission (``now`` when unknown or
  later) to ``now``, each widened by ``margin``. Code inside a job may post before Slurm's state says it runs (a
  prolog, a slow sync); nothing it measured can be later than now.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

#: The most buckets any grid over time may have (a 30-day job at 2-minute buckets). A finer step asked for, or a
#: span of readings longer than the step allows, makes the step grow instead.
MAX_BUCKETS = 20_000


def _stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


def _minutes(margin: timedelta) -> str:
    minutes = margin.total_seconds() / 60
    return f"{minutes:g} min"


@dataclass(frozen=True)
class WriteWindow:
    """``[start, end]`` (aware UTC datetimes, the margin included): the times a job's own writes may carry."""

    start: datetime
    end: datetime
    margin: timedelta
    basis: str  # what the window is made of, in words ("the job's run time", ...)

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= moment <= self.end

    def as_tuple(self) -> tuple[datetime, datetime]:
        return self.start, self.end

    def words(self) -> str:
        """``2026-05-01T10:00:00Z – 2026-05-01T12:10:00Z (the job's run time ± 10 min)``."""
        return f"{_stamp(self.start)} – {_stamp(self.end)} ({self.basis} ± {_minutes(self.margin)})"

    def refusal(self, moment: datetime, field: str | None = None) -> str | None:
        """None when ``moment`` is inside; else the reason, naming ``field`` when given."""
        if moment in self:
            return None
        where = f"{field}: " if field else ""
        return f"{where}{_stamp(moment)} is outside the job's write window {self.words()}"


def write_window(*, pending: bool, start: datetime | None, end: datetime | None, submit: datetime | None,
                 now: datetime, margin: timedelta) -> WriteWindow:
    """The window of a job's own writes (the rule in the module's docstring). ``pending``: Slurm says the job waits."""
    if margin < timedelta(0):
        raise ValueError("the margin of a job's write window cannot be negative")
    ended = end is not None and end <= now
    if start is not None and not pending and (start <= now or ended):
        first = start
        last = end if ended else now
        basis = "the job's run time" if ended else "the job's run time until now"
    else:
        first = min(submit or now, now)
        last = now
        basis = "the job's time since its submission (pending)"
    last = max(last, first)
    return WriteWindow(start=first - margin, end=last + margin, margin=margin, basis=basis)


def capped_step(span_s: float, step_s: float, most: int = MAX_BUCKETS) -> float:
    """``step_s``, or the smallest whole number of seconds at least as large that covers ``span_s`` seconds in at most
    ``most`` buckets (one more bucket may be needed where the span does not start at a bucket edge)."""
    if not step_s > 0 or not math.isfinite(step_s):
        raise ValueError("step must be a positive number of seconds")
    if most < 2:
        raise ValueError("a grid needs at least two buckets")
    span_s = max(float(span_s), 0.0) if math.isfinite(span_s) else 0.0
    if span_s / step_s <= most - 1:
        return step_s
    return float(math.ceil(span_s / (most - 1)))


def step_note(asked_s: float, used_s: float, most: int = MAX_BUCKETS) -> str:
    """The words an answer carries when :func:`capped_step` grew the step; "" when it did not."""
    if used_s <= asked_s:
        return ""
    return (f"step raised from {_seconds(asked_s)} s to {_seconds(used_s)} s: a grid over time has at most {most:,} "
            f"buckets whatever the data's span")


def _seconds(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3f}"
