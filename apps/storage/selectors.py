"""Reads of the storage app: a job's Lustre counters as rates over time, its write bursts and the GPUs' activity and
throughput on the same time axis.

Access is the jobs app's rule: the API finds the job with ``apps.jobs.access.job_for_request`` first, the job page
shows only jobs its viewer may see; these functions take such a job.
"""
from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd

from apps.core.timebounds import step_note
from apps.telemetry.lustre import PREFIX, RATE_COLUMNS, io_step, job_io, totals
from apps.telemetry.selectors import job_cube
from apps.telemetry.store import telemetry_store

from . import bursts as burst_rules

SM_FIELD, UTIL_FIELD = 1002, 203
NICE_STEPS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
MAX_BUCKETS = 1500
SERIES_KEYS = {"read_bytes_per_s": "read_bytes", "write_bytes_per_s": "write_bytes", "read_ops_per_s": "read_ops",
               "write_ops_per_s": "write_ops", "metadata_ops_per_s": "metadata_ops"}


def lustre_series(job, start: datetime | None = None, end: datetime | None = None) -> pd.DataFrame:
    """The job's ``lustre/<target>/<stat>`` series (APP_COLUMNS), cumulative as imported."""
    frame = telemetry_store().read_job_series(job.cluster.name, int(job.job_id), start=start, end=end)
    return frame[frame["name"].astype(str).str.startswith(PREFIX)].reset_index(drop=True)


def choose_step(first, last, asked: int | None = None) -> int:
    """``asked``, or the finest of ``NICE_STEPS`` that gives at most ``MAX_BUCKETS`` buckets over the span. (An asked
    step too fine for the span grows in :func:`job_storage`: ``apps.telemetry.lustre.io_step``.)"""
    if asked:
        return int(asked)
    span = max((pd.Timestamp(last) - pd.Timestamp(first)).total_seconds(), 1.0)
    return next((step for step in NICE_STEPS if span / step <= MAX_BUCKETS), NICE_STEPS[-1])


def _iso(values) -> list[str]:
    return [str(t) + "Z" for t in np.datetime_as_string(np.asarray(values, dtype="datetime64[ns]"), unit="s")]


def _numbers(values) -> list[float | None]:
    return [None if not math.isfinite(v) else round(float(v), 3) for v in np.asarray(values, dtype=float)]


def gpu_activity(job) -> dict | None:
    """{"time", "activity" (mean SM activity of the job's GPUs, 0..1, or GPU utilisation / 100), "name", "step"} from
    the job's telemetry cube; None without one."""
    cube = job_cube(job, (SM_FIELD, UTIL_FIELD))
    if cube is None or not len(cube.buckets):
        return None
    for field, name, scale in ((SM_FIELD, "SM active", 1.0), (UTIL_FIELD, "GPU busy", 100.0)):
        index = cube.field_index(field)
        if index is None:
            continue
        with np.errstate(all="ignore"):
            block = cube.mean[:, index, :].astype(float)
            if not np.isfinite(block).any():
                continue
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                values = np.nanmean(block, axis=0) / scale
        return {"time": cube.buckets, "activity": values, "name": name, "step": int(cube.step), "gpus": int(len(cube.hosts))}
    return None


def tokens_per_s(job, start=None, end=None) -> pd.DataFrame:
    """The job's logged ``tokens_per_s`` series (ts, value), empty when it logs none."""
    frame = telemetry_store().read_job_series(job.cluster.name, int(job.job_id), names=["tokens_per_s"], start=start, end=end)
    return frame[["ts", "value"]]


def job_storage(job, step: int | None = None, start: datetime | None = None, end: datetime | None = None,
                with_gpu: bool = True) -> dict:
    """The job's file-system activity: rates per bucket, totals, write bursts (each with the GPUs' idle seconds
    around it) and the verdict; ``series`` empty and ``coverage`` None when the job has no Lustre counters."""
    frame = lustre_series(job, start, end)
    if frame.empty:
        return {"step": step, "step_note": "", "coverage": None,
                "series": {"time": [], **{key: [] for key in SERIES_KEYS.values()}},
                "totals": {}, "targets": [], "bursts": [], "verdict": ""}
    first, last = frame["ts"].min(), frame["ts"].max()
    asked = choose_step(first, last, step)
    step = io_step(frame, asked)  # at most timebounds.MAX_BUCKETS buckets, whatever the readings' span
    rates = job_io(frame, step)
    # No rate at all (one reading per counter, e.g. ``since`` less than a reading interval ago): job_io's empty
    # frame has no datetime column, so the times go through to_datetime.
    times = pd.to_datetime(rates["time"], utc=True).dt.tz_convert(None).to_numpy("datetime64[ns]")
    found = burst_rules.find_bursts(times, rates["write_bytes_per_s"].to_numpy(float), step) if len(rates) else []
    gpu = gpu_activity(job) if with_gpu and found else None
    idle = (burst_rules.idle_during(found, gpu["time"], gpu["activity"], gpu["step"]) if gpu is not None
            else [None] * len(found))
    targets = sorted({str(name)[len(PREFIX):].rsplit("/", 1)[0] for name in frame["name"].unique()})
    return {
        "step": step,
        "step_note": step_note(asked, step),
        "coverage": {"first": first.isoformat(), "last": last.isoformat(), "readings": int(frame["ts"].nunique())},
        "series": {"time": _iso(times),
                   **{SERIES_KEYS[column]: _numbers(rates[column]) for column in RATE_COLUMNS}},
        "totals": {key: float(value) for key, value in totals(frame).items()},
        "targets": targets,
        "bursts": [{"start": _iso([b["start"]])[0], "end": _iso([b["end"]])[0], "write_bytes": b["write_bytes"],
                    "peak_rate": b["peak_rate"], "gpu_idle_s": seconds} for b, seconds in zip(found, idle)],
        "verdict": burst_rules.verdict(found, idle),
    }
