"""When to checkpoint: the campaign's measured checkpoint cost and interval against the Young–Daly optimum.

* **cost C**: the median time a checkpoint save held training (the ``event.checkpoint`` markers' seconds; a marker
  whose value is 1 says "took an unknown time" and is left out);
* **interval**: the median time between the starts of consecutive checkpoints within one allocation;
* **optimum**: Daly's first-order form of Young's √(2·C·M), M the campaign's MTBF:
  ``τ = √(2·C·M)·[1 + ⅓·√(C/(2M)) + (1/9)·(C/(2M))] − C`` for C < 2M, else ``τ = M``
  (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22, 2006);
* **worth**: the share of GPU-hours the optimum saves, by the first-order waste of an interval τ,
  ``W(τ) = C/τ + τ/(2M)`` (the checkpoints' own cost, plus half an interval of work lost per failure):
  ``W(measured) − W(optimum)``.

Without an MTBF (no failure yet) there is no optimum: the words say so. Plain Python: no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

UNKNOWN_SECONDS = 1.0  # a marker's value when the application did not say how long the save took


@dataclass(frozen=True)
class Advice:
    interval_s: float | None
    cost_s: float | None
    young_s: float | None  # √(2·C·M)
    young_daly_s: float | None  # Daly's first-order optimum
    mtbf_s: float | None
    worth_share: float | None  # of GPU-hours, 0-1 (negative: the measured interval is already better)
    words: str


def young(cost_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * cost_s * mtbf_s)


def daly(cost_s: float, mtbf_s: float) -> float:
    """Daly's first-order optimum checkpoint interval (seconds of computation between checkpoints)."""
    if cost_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = cost_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * cost_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - cost_s


def waste_share(interval_s: float, cost_s: float, mtbf_s: float) -> float:
    """First-order share of time lost to checkpointing every ``interval_s``: C/τ + τ/(2M)."""
    return cost_s / interval_s + interval_s / (2.0 * mtbf_s)


def measured_cost(seconds) -> float | None:
    known = [float(s) for s in seconds if s is not None and math.isfinite(s) and s > UNKNOWN_SECONDS]
    return float(median(known)) if known else None


def measured_interval(starts_by_allocation) -> float | None:
    """Median gap between consecutive checkpoint starts (datetimes), allocation by allocation."""
    gaps = []
    for starts in starts_by_allocation:
        ordered = sorted(starts)
        gaps.extend((b - a).total_seconds() for a, b in zip(ordered, ordered[1:]) if b > a)
    return float(median(gaps)) if gaps else None


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def advise(interval_s: float | None, cost_s: float | None, mtbf_hours: float | None) -> Advice:
    """The advice in numbers and words: "you checkpoint every 41 min; with C = 90 s and MTBF = 4.4 h the optimum is
    27 min, worth ~0.8 % of GPU-hours"."""
    mtbf_s = mtbf_hours * 3600.0 if mtbf_hours else None
    young_s = young(cost_s, mtbf_s) if cost_s and mtbf_s else None
    optimum = daly(cost_s, mtbf_s) if cost_s and mtbf_s else None
    every = f"you checkpoint every {_minutes(interval_s)}" if interval_s else "no two checkpoints in one allocation were measured"
    cost = f"C = {cost_s:.0f} s" if cost_s and cost_s < 600 else f"C = {_minutes(cost_s)}" if cost_s else "no checkpoint cost measured (markers without a duration)"
    if mtbf_s is None:
        return Advice(interval_s, cost_s, None, None, None, None,
                      f"{every[0].upper()}{every[1:]}; {cost}. No failure yet, so the MTBF is unknown and there is no "
                      f"optimum interval to compare with.")
    if optimum is None:
        return Advice(interval_s, cost_s, None, None, mtbf_s, None,
                      f"{every[0].upper()}{every[1:]}; {cost}: the optimum needs the checkpoint cost.")
    worth = None
    tail = ""
    if interval_s and optimum > 0:
        worth = waste_share(interval_s, cost_s, mtbf_s) - waste_share(optimum, cost_s, mtbf_s)
        tail = (f", worth ~{worth * 100:.1f} % of GPU-hours" if worth >= 0.0005 else
                ": your interval is as good as the optimum")
    return Advice(interval_s, cost_s, young_s, optimum, mtbf_s, worth,
                  f"{every[0].upper()}{every[1:]}; with {cost} and MTBF = {mtbf_hours:.1f} h the optimum is "
                  f"{_minutes(optimum)}{tail}.")
