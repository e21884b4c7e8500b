"""Is the job host-bound? GPUs that wait on their data loaders, named as such (issue 39).

``host_bound(iterations, loader, gpu_idle, checkpoints)`` reads the job's iteration times (``iteration_s``,
or the inverse of ``tokens_per_s``), its data-loader workers' CPU share per bucket (the collector's
``host_dataloader_cpu``: 1 = every worker busy all the time, ``apps/telemetry/hostfields.py``) and the share
of its GPUs idle per bucket, and answers one finding or None:

* **slow iterations**: an iteration is slow when it took ``SLOW`` (1.2) times the median iteration or longer.
  Slow iterations inside a checkpoint (``checkpoints``: the (start, end) of the job's checkpoint events, from
  ``events.find_events``, or of its ``event.checkpoint`` markers, widened by ``tolerance_s``) are the
  checkpoint's, not the host's, and are left out. When at least ``MIN_SLOW`` (5 %) of the iterations are
  slow and, at the buckets they ended in, the data-loader workers were on average at ``SATURATED`` (90 %)
  of their CPUs or more and the GPUs at least ``IDLE`` (40 %) idle, the job is host-bound:
  "GPUs wait on the host: during the 40 % of iterations that ran slow, the ranks' data-loader workers were
  at 100 % of their CPUs and the GPUs idle".
* **low saturation without dips**: no slow iterations, but over the whole run the workers at ``SATURATED``
  or more and the GPUs at least ``IDLE_STEADY`` (25 %) idle: "GPUs wait on the host: the ranks' data-loader
  workers were at 97 % of their CPUs throughout and the GPUs idle 35 % of the time".

A saturated loader with busy GPUs is not host-bound (the GPUs keep up), nor are idle GPUs with quiet
loaders (network, a straggler: other findings say those). The answer's ``limiter`` is "host (data loading)".
Plain Python: no Django (numpy, pandas).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

SLOW, MIN_SLOW = 1.2, 0.05
SATURATED, IDLE, IDLE_STEADY = 0.9, 0.4, 0.25
LIMITER = "host (data loading)"
ACTION = ("Give the data loader more CPU: more workers (DataLoader num_workers) on the NUMA domain of each rank's GPU, "
          "pre-tokenised data, pinned memory and prefetching; check the page cache and the file system the data is "
          "read from.")


def _ns(values) -> np.ndarray:
    """Nanoseconds since the epoch of datetimes, datetime64 values or ISO text (naive: UTC)."""
    if not len(values):
        return np.array([], dtype="int64")
    return pd.DatetimeIndex(pd.to_datetime(pd.Series(np.asarray(values) if not isinstance(values, pd.Series) else values),
                                           utc=True)).as_unit("ns").asi8.copy()


def _one_ns(value) -> int:
    stamp = pd.Timestamp(value)
    return int((stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).as_unit("ns").value)


def _at(bucket_ns: np.ndarray, values: np.ndarray, when_ns: np.ndarray, step_ns: int) -> np.ndarray:
    """The bucket value at each moment (the bucket that holds it); NaN outside the buckets."""
    if not len(bucket_ns):
        return np.full(len(when_ns), np.nan)
    index = np.searchsorted(bucket_ns, when_ns, side="right") - 1
    inside = (index >= 0) & (when_ns < bucket_ns[np.clip(index, 0, None)] + step_ns)
    out = np.full(len(when_ns), np.nan)
    out[inside] = values[index[inside]]
    return out


def percent(share: float) -> str:
    return f"{round(100 * share)} %"


def host_bound(iteration_ts, iteration_s, loader_ts, loader_cpu, idle_ts, gpu_idle, step_s: float,
               checkpoints=(), tolerance_s: float | None = None) -> dict | None:
    """The host-bound finding of a job, or None. Times: datetime64-like; ``loader_*`` and ``idle_*`` are buckets
    of ``step_s`` seconds (their starts); ``checkpoints``: (start, end) datetime pairs (end None: one bucket)."""
    ends = _ns(iteration_ts)
    seconds = np.asarray(iteration_s, dtype="float64")
    loader_ns, loader = _ns(loader_ts), np.asarray(loader_cpu, dtype="float64")
    idle_ns, idle = _ns(idle_ts), np.asarray(gpu_idle, dtype="float64")
    if len(ends) < 10 or not len(loader_ns) or not len(idle_ns):
        return None
    step_ns = int(step_s * 1e9)
    tolerance_ns = int((tolerance_s if tolerance_s is not None else 2 * step_s) * 1e9)
    keep = np.isfinite(seconds) & (seconds > 0)
    ends, seconds = ends[keep], seconds[keep]
    median = float(np.median(seconds))
    slow = seconds >= SLOW * median
    in_checkpoint = np.zeros(len(ends), dtype=bool)
    for start, end in checkpoints:
        lo = _one_ns(start) - tolerance_ns
        hi = (_one_ns(end) if end is not None else lo + tolerance_ns + step_ns) + tolerance_ns
        # an iteration that overlaps the checkpoint: it ended after the checkpoint began and began before it ended
        began = ends - (seconds * 1e9).astype("int64")
        in_checkpoint |= (ends >= lo) & (began <= hi)
    host_slow = slow & ~in_checkpoint
    loader_at = _at(loader_ns, loader, ends, step_ns)
    idle_at = _at(idle_ns, idle, ends, step_ns)
    share = float(host_slow.sum()) / len(ends)
    if share >= MIN_SLOW:
        cpu, gpus = np.nanmean(loader_at[host_slow]) if np.isfinite(loader_at[host_slow]).any() else np.nan, \
            np.nanmean(idle_at[host_slow]) if np.isfinite(idle_at[host_slow]).any() else np.nan
        if np.isfinite(cpu) and np.isfinite(gpus) and cpu >= SATURATED and gpus >= IDLE:
            sentence = (f"GPUs wait on the host: during the {percent(share)} of iterations that ran slow, the ranks' "
                        f"data-loader workers were at {percent(min(cpu, 1.0))} of their CPUs and the GPUs idle")
            return {"kind": "host-bound", "sentence": sentence, "slow_share": share, "loader_cpu": float(cpu),
                    "gpu_idle": float(gpus), "limiter": LIMITER, "action": ACTION,
                    "checkpoint_iterations": int((slow & in_checkpoint).sum())}
        return None
    if slow.any() and not host_slow.any():
        return None  # every slow iteration is a checkpoint's
    cpu, gpus = float(np.nanmean(loader)) if np.isfinite(loader).any() else np.nan, \
        float(np.nanmean(idle)) if np.isfinite(idle).any() else np.nan
    if np.isfinite(cpu) and np.isfinite(gpus) and cpu >= SATURATED and gpus >= IDLE_STEADY:
        sentence = (f"GPUs wait on the host: the ranks' data-loader workers were at {percent(min(cpu, 1.0))} of their "
                    f"CPUs throughout and the GPUs idle {percent(gpus)} of the time")
        return {"kind": "host-bound", "sentence": sentence, "slow_share": 0.0, "loader_cpu": cpu, "gpu_idle": gpus,
                "limiter": LIMITER, "action": ACTION, "checkpoint_iterations": 0}
    return None
