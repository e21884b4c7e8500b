"""A job's efficiency from its application series and its GPUs' telemetry: steady tokens/s, per GPU, MFU, energy per
token, and the hardware evidence its throughput dips are explained by. Plain Python: no Django.

* **Steady throughput** is the median of ``tokens_per_s`` after the warm-up (the first 10 % of the series' span,
  at most 10 minutes): dips are short, so the median is the rate the job trains at.
* **Tokens** over a span are the time integral of ``tokens_per_s`` (trapezoids between logged points; a gap longer
  than :data:`GAP_FACTOR` logging intervals counts nothing: the job was not training, or not logging).
* **Energy** comes from DCGM's total energy counter (field 156, mJ since the driver loaded): per GPU the rise of the
  bucket maxima over the span; a GPU whose counter goes back (driver reload) counts its rises only.
  **Energy per token** = energy of all the job's GPUs / tokens, over the span both cover.
* **Evidence** per telemetry bucket (:func:`evidence_arrays`): the share of the job's GPUs idle (SM activity, field
  1002, under :data:`IDLE_SM`), the mean tensor (1004) and DRAM (1005) activity, and per GPU whether its clock
  throttle reasons (field 112) held a power-cap (0x4, 0x400 HW power brake) or thermal (0x20, 0x40, 0x8) bit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

IDLE_SM = 0.15
GAP_FACTOR = 5.0
ENERGY_FIELD, SM_FIELD, TENSOR_FIELD, DRAM_FIELD, THROTTLE_FIELD = 156, 1002, 1004, 1005, 112
EVIDENCE_FIELDS = (SM_FIELD, TENSOR_FIELD, DRAM_FIELD, THROTTLE_FIELD, ENERGY_FIELD)
POWER_BITS = 0x4 | 0x80 | 0x400  # SW power cap, HW slowdown, HW power brake
THERMAL_BITS = 0x8 | 0x20 | 0x40  # HW slowdown (thermal), SW thermal, HW thermal


def throughput(series: pd.DataFrame, global_batch: int | None, seq_len: int | None) -> tuple[np.ndarray, np.ndarray, str]:
    """(times, tokens/s, where it came from) of a job's application series (APP_COLUMNS): the logged
    ``tokens_per_s``, else global batch x sequence length / ``iteration_s``; empty when neither can be had."""
    logged = series[series["name"] == "tokens_per_s"]
    if len(logged):
        return logged["ts"].to_numpy("datetime64[ns]"), logged["value"].to_numpy(float), "logged tokens_per_s"
    iteration = series[series["name"] == "iteration_s"]
    if len(iteration) and global_batch and seq_len:
        seconds = iteration["value"].to_numpy(float)
        with np.errstate(divide="ignore"):
            rate = np.where(seconds > 0, global_batch * seq_len / seconds, np.nan)
        return iteration["ts"].to_numpy("datetime64[ns]"), rate, "global batch x sequence length / iteration time"
    return np.array([], dtype="datetime64[ns]"), np.array([], dtype=float), ""


def energy_per_token(buckets: np.ndarray, step_s: float, energy_max: np.ndarray, ts: np.ndarray,
                     tokens_per_s: np.ndarray) -> float | None:
    """Joules per token over the span both cover: the energy counter's rise (per GPU x bucket maxima, mJ) in the
    buckets from the first to the last logged throughput, over the tokens trained from then to the last one."""
    if not len(ts):
        return None
    seconds = np.asarray(buckets, dtype="datetime64[ns]").astype("int64") / 1e9
    first, last = _seconds(ts).min(), _seconds(ts).max()
    inside = (seconds >= first - step_s) & (seconds <= last)
    if not inside.any():
        return None
    energy = energy_rise_j(np.asarray(energy_max)[:, inside])
    tokens = tokens_between(ts, tokens_per_s, max(first, seconds[inside].min()), last)
    return energy / tokens if energy and tokens > 0 else None


def _seconds(ts: np.ndarray) -> np.ndarray:
    return np.asarray(ts, dtype="datetime64[ns]").astype("int64") / 1e9


def steady_rate(ts: np.ndarray, values: np.ndarray) -> float | None:
    """Median of ``values`` after the warm-up (first 10 % of the span, at most 600 s); None without finite values."""
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values)
    if not keep.any():
        return None
    seconds = _seconds(ts)[keep]
    values = values[keep]
    start = seconds.min() + min(600.0, 0.1 * (seconds.max() - seconds.min()))
    steady = values[seconds >= start]
    return float(np.median(steady if len(steady) else values))


def logging_interval(ts: np.ndarray) -> float | None:
    seconds = np.unique(_seconds(ts))
    if len(seconds) < 2:
        return None
    return float(np.median(np.diff(seconds)))


def tokens_between(ts: np.ndarray, tokens_per_s: np.ndarray, start: float | None = None, end: float | None = None) -> float:
    """Tokens trained between epoch seconds ``start`` and ``end`` (default: the whole series)."""
    seconds = _seconds(ts)
    values = np.asarray(tokens_per_s, dtype=float)
    order = np.argsort(seconds, kind="stable")
    seconds, values = seconds[order], values[order]
    keep = np.isfinite(values) & (seconds >= (start if start is not None else -np.inf)) & (seconds <= (end if end is not None else np.inf))
    seconds, values = seconds[keep], values[keep]
    if len(seconds) < 2:
        return 0.0
    width = np.diff(seconds)
    interval = float(np.median(width)) if len(width) else 0.0
    usable = width <= GAP_FACTOR * max(interval, 1e-9)
    return float(np.sum(((values[1:] + values[:-1]) / 2.0 * width)[usable]))


def energy_rise_j(energy_max: np.ndarray) -> float | None:
    """Joules the GPUs used, from per-GPU x bucket maxima of the energy counter (mJ); None without two readings."""
    energy = np.asarray(energy_max, dtype=float)
    if energy.ndim != 2 or energy.shape[1] < 2:
        return None
    rises = np.diff(energy, axis=1)
    rises = np.where(np.isfinite(rises) & (rises >= 0), rises, 0.0)
    if not np.isfinite(energy).sum(axis=1).max(initial=0) >= 2:
        return None
    return float(rises.sum() / 1000.0)


def evidence_arrays(fields: list[int], mean: np.ndarray, maxima: np.ndarray, labels: list[str]) -> dict:
    """From a job cube's per-GPU x field x bucket means and maxima: {"idle_share", "sm_active", "tensor_active", "dram_active",
    "throttled": {label: the power and thermal throttle bits per bucket (only GPUs that had any)}} (NaN where unknown)."""
    index = {int(field): i for i, field in enumerate(fields)}
    buckets = mean.shape[2] if mean.ndim == 3 else 0
    out = {"idle_share": np.full(buckets, np.nan), "sm_active": np.full(buckets, np.nan),
           "tensor_active": np.full(buckets, np.nan), "dram_active": np.full(buckets, np.nan), "throttled": {}}
    with np.errstate(invalid="ignore"):
        if SM_FIELD in index:
            sm = mean[:, index[SM_FIELD], :].astype(float)
            reporting = np.isfinite(sm).sum(axis=0)
            idle = (np.where(np.isfinite(sm), sm, np.inf) < IDLE_SM).sum(axis=0)
            out["idle_share"] = np.where(reporting > 0, idle / np.maximum(reporting, 1), np.nan)
        for name, field in (("sm_active", SM_FIELD), ("tensor_active", TENSOR_FIELD), ("dram_active", DRAM_FIELD)):
            if field in index:
                block = mean[:, index[field], :].astype(float)
                counts = np.isfinite(block).sum(axis=0)
                out[name] = np.where(counts > 0, np.nansum(block, axis=0) / np.maximum(counts, 1), np.nan)
        if THROTTLE_FIELD in index:
            bits = np.nan_to_num(maxima[:, index[THROTTLE_FIELD], :].astype(float), nan=0.0).astype(np.int64)
            for row, label in enumerate(labels):
                relevant = bits[row] & (POWER_BITS | THERMAL_BITS)
                if relevant.any():
                    out["throttled"][label] = relevant
    return out


UTIL_FIELD = 203  # GPU utilisation (percent), where the profiling field SM active is not collected


def fine_idle_share(samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The share of GPUs idle at the resolution of their own samples, from raw samples (telemetry COLUMNS: ts, host,
    gpu, field, value) of SM active (1002, idle under ``IDLE_SM``) or, without it, GPU utilisation (203, idle under
    ``IDLE_SM`` x 100 %): (bin starts as datetime64[ns], shares 0-1). The bins are the GPUs' median sampling
    interval (at least 1 s), so GPUs sampled a moment apart share a bin; a GPU's samples in one bin are averaged."""
    if samples.empty:
        return np.array([], dtype="datetime64[ns]"), np.array([], dtype=float)
    sm = samples[samples["field"] == SM_FIELD]
    chosen, threshold = (sm, IDLE_SM) if len(sm) else (samples[samples["field"] == UTIL_FIELD], IDLE_SM * 100)
    if chosen.empty:
        return np.array([], dtype="datetime64[ns]"), np.array([], dtype=float)
    ts = pd.to_datetime(chosen["ts"], utc=True).dt.tz_convert(None).astype("datetime64[ns]")
    frame = pd.DataFrame({"ns": ts.to_numpy().astype("int64"), "gpu": chosen["host"].astype(str) + ":" + chosen["gpu"].astype(str),
                          "value": chosen["value"].to_numpy(float)})
    frame = frame.sort_values(["gpu", "ns"])
    gaps = frame.groupby("gpu")["ns"].diff().dropna()
    step_ns = max(int(1e9), int(np.median(gaps[gaps > 0]))) if (gaps > 0).any() else int(1e9)
    frame["bin"] = frame["ns"] // step_ns * step_ns
    per_gpu = frame.groupby(["bin", "gpu"])["value"].mean().reset_index()
    per_gpu["idle"] = per_gpu["value"] < threshold
    shares = per_gpu.groupby("bin")["idle"].mean()
    return shares.index.to_numpy().astype("datetime64[ns]"), shares.to_numpy(float)


def mean_active(values: np.ndarray) -> float | None:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else None


LATE_MIN_S, LATE_SHARE = 600.0, 0.05


def telemetry_starts_late(first, gpu_first, last) -> bool:
    """Whether the GPU telemetry starts well after the application's first row (datetimes): later by more than ten
    minutes and more than a twentieth of the rows' span. A figure then says so, or its empty start reads as idle GPUs."""
    late = (gpu_first - first).total_seconds()
    return late > max(LATE_MIN_S, LATE_SHARE * (last - first).total_seconds())
