"""Write bursts in a job's file-system rates (checkpoints), lined up with the GPUs' idle time, and the verdict.

Plain Python: no Django.

* :func:`find_bursts`: runs of buckets whose write rate stands far above the job's own steady level (five times
  its median, and at least a fifth of its peak and ``MIN_BURST_BPS``): {start, end, write_bytes, peak_rate}.
* :func:`idle_during`: per burst, the seconds the GPUs sat idle around it, from the job's GPU telemetry: each bucket
  around the burst whose mean activity dips under ``IDLE_FRACTION`` of its median counts for the share of its time
  the activity was missing (1 - activity / median); None where that telemetry has no bucket at the time.
* :func:`verdict`: "Checkpoints: 6 bursts of ~2.4 TB every 30 min, writing at 27 GB/s; GPUs idle 90 s each".
"""
from __future__ import annotations

import numpy as np

MIN_BURST_BPS = 100e6  # bytes/s: below this no write is a burst worth naming
BURST_OVER_MEDIAN = 5.0
BURST_OVER_PEAK = 0.2
# A GPU bucket dips under this fraction of the job's median activity: 90 s of idle SMs split over two 120 s buckets
# leaves each at 40-70 % of the usual activity; the synchronous run's noise moves the mean of its GPUs by a few %.
IDLE_FRACTION = 0.75


def human_bytes(value: float | None, per_s: bool = False) -> str:
    """Decimal units, two significant figures from 10 up: "2.4 TB", "27 GB/s"."""
    if value is None or not np.isfinite(value):
        return "–"
    suffix = "/s" if per_s else ""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            number = value / scale
            return f"{number:.2g} {unit}{suffix}" if number < 10 else f"{number:.0f} {unit}{suffix}"
    return f"{value:.0f} B{suffix}"


def _ns(times) -> np.ndarray:
    return np.asarray(times, dtype="datetime64[ns]").astype("int64")


def find_bursts(times, write_rate, step: int) -> list[dict]:
    """Bursts of the write rate (bytes/s per bucket of ``step`` s starting at ``times``), in time order; the times
    as numpy datetime64 (start of the first bucket, end of the last)."""
    rate = np.nan_to_num(np.asarray(write_rate, dtype=float), nan=0.0)
    if not len(rate):
        return []
    peak = float(rate.max())
    threshold = max(BURST_OVER_MEDIAN * float(np.median(rate)), BURST_OVER_PEAK * peak, MIN_BURST_BPS)
    if peak < threshold:
        return []
    above = rate >= threshold
    starts = np.flatnonzero(above & ~np.concatenate([[False], above[:-1]]))
    ends = np.flatnonzero(above & ~np.concatenate([above[1:], [False]]))
    stamps = np.asarray(times, dtype="datetime64[ns]")
    out = []
    for lo, hi in zip(starts, ends):
        # the burst's bytes: its buckets and the shoulders on either side (a burst rarely fills whole buckets)
        a, b = max(lo - 1, 0), min(hi + 1, len(rate) - 1)
        shoulder = np.where(rate[a:b + 1] >= max(float(np.median(rate)) * 2, MIN_BURST_BPS / 10), rate[a:b + 1], 0.0)
        out.append({"start": stamps[lo], "end": stamps[hi] + np.timedelta64(int(step), "s"),
                    "write_bytes": float(shoulder.sum() * step), "peak_rate": float(rate[lo:hi + 1].max())})
    return out


def idle_mask(activity) -> np.ndarray:
    """Buckets where the GPUs' mean activity is under ``IDLE_FRACTION`` of its median (NaN: not idle, unknown)."""
    values = np.asarray(activity, dtype=float)
    if not np.isfinite(values).any():
        return np.zeros(len(values), dtype=bool)
    level = float(np.nanmedian(values))
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values < IDLE_FRACTION * level)


def idle_during(bursts: list[dict], gpu_times, activity, gpu_step: int, margin_s: int | None = None) -> list[float | None]:
    """Per burst, the seconds of idle GPU buckets overlapping it (widened by ``margin_s``, one GPU bucket by
    default); None where the GPU telemetry has no bucket in that span."""
    if not bursts:
        return []
    times = _ns(gpu_times)
    values = np.asarray(activity, dtype=float)
    idle = idle_mask(values)
    level = float(np.nanmedian(values)) if np.isfinite(values).any() else 0.0
    margin = int((gpu_step if margin_s is None else margin_s) * 1e9)
    out = []
    for burst in bursts:
        lo, hi = int(_ns([burst["start"]])[0]) - margin, int(_ns([burst["end"]])[0]) + margin
        inside = (times + int(gpu_step * 1e9) > lo) & (times < hi)
        known = inside & np.isfinite(values)
        if not known.any():
            out.append(None)
        elif not idle[inside].any():
            out.append(0.0)
        else:  # a bucket at a quarter of the usual activity was idle about three quarters of its time
            dips = inside & idle
            missing = np.clip(1.0 - values[dips] / level, 0.0, 1.0)
            out.append(float(np.round(missing.sum() * gpu_step)))
    return out


def _span_words(seconds: float) -> str:
    if seconds < 180:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.2g} h"


def verdict(bursts: list[dict], idle: list[float | None]) -> str:
    """The panel's first sentence about the job's checkpoints ("" without bursts)."""
    if not bursts:
        return ""
    size = float(np.median([b["write_bytes"] for b in bursts]))
    rate = float(np.median([b["peak_rate"] for b in bursts]))
    words = f"Checkpoints: {len(bursts)} burst{'s' if len(bursts) != 1 else ''} of ~{human_bytes(size)}"
    if len(bursts) > 1:
        gaps = np.diff(_ns([b["start"] for b in bursts])) / 1e9
        words += f" every {_span_words(float(np.median(gaps)))}"
    words += f", writing at {human_bytes(rate, per_s=True)}"
    known = [value for value in idle if value is not None]
    if known:
        typical = float(np.median(known))
        partial = "" if len(known) == len(bursts) else f" (the {len(known)} of {len(bursts)} with GPU telemetry)"
        words += (f"; GPUs idle {_span_words(typical)} each{partial}" if typical > 0
                  else f"; the GPUs kept working meanwhile (asynchronous saves){partial}")
    else:
        words += "; no GPU telemetry at those times"
    return words
