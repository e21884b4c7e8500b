"""The telemetry store interface and its canonical table.

Every backend takes and returns one canonical pandas table, long format, one row per sample:

    ts (datetime64[ns, UTC]) | cluster | host | gpu (int16) | uuid | field (int32, DCGM id) | value (float64)

Samples are identified by (cluster, host, gpu, field, ts): writing the same key again replaces the
value, so re-sending a batch changes nothing. Backends are chosen by the ``TELEMETRY_BACKENDS``
setting (see ``apps/telemetry/store.py``) and share one contract test suite
(``tests/telemetry/contract.py``). Plain Python: no Django.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

COLUMNS = ["ts", "cluster", "host", "gpu", "uuid", "field", "value"]
KEY = ["cluster", "host", "gpu", "field", "ts"]
DTYPES = {"cluster": "object", "host": "object", "gpu": "int16", "uuid": "object", "field": "int32", "value": "float64"}
STATS = ("mean", "min", "max", "p10", "p50", "p90")
DEFAULT_STATS = ("mean", "min", "max")
PERCENTILES = {"p10": 0.1, "p50": 0.5, "p90": 0.9}
AGGREGATE_COLUMNS = ["bucket", "cluster", "host", "gpu", "field", "count", *STATS]


class TelemetryUnavailable(RuntimeError):
    """The store cannot be reached or used; the message says which store and what to do."""


@dataclass(frozen=True)
class Query:
    """A window of samples: [start, end) for the given hosts, GPUs and fields (None: all)."""

    start: datetime
    end: datetime
    cluster: str | None = None
    hosts: tuple[str, ...] | None = None
    gpus: tuple[int, ...] | None = None
    fields: tuple[int, ...] | None = None

    def __post_init__(self):
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, datetime):
                raise TypeError(f"Query.{name} must be a datetime, not {type(value).__name__}")
            if value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=timezone.utc))
        if self.end <= self.start:
            raise ValueError(f"Query window is empty: end {self.end:%Y-%m-%d %H:%M:%S} is not after start {self.start:%Y-%m-%d %H:%M:%S}")
        for name in ("hosts", "gpus", "fields"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))


def utc_from_ns(values) -> pd.DatetimeIndex:
    """Integer nanoseconds since the epoch as UTC timestamps. A dtype view: pandas' ``to_datetime`` on an
    integer column with ``utc=True`` goes through Python objects (seconds for millions of rows)."""
    return pd.DatetimeIndex(np.asarray(values, dtype="int64").view("datetime64[ns]")).tz_localize("UTC")


def empty_frame() -> pd.DataFrame:
    frame = pd.DataFrame({column: pd.Series(dtype=DTYPES.get(column, "object")) for column in COLUMNS})
    frame["ts"] = pd.Series(dtype="datetime64[ns, UTC]")
    return frame[COLUMNS]


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the canonical columns and dtypes (uuid "" where missing), without re-ordering rows.
    Raises ValueError naming the missing column."""
    missing = [column for column in COLUMNS if column not in frame.columns and column not in ("uuid", "cluster")]
    if missing:
        raise ValueError(f"telemetry frame lacks column(s) {', '.join(missing)}; needs {', '.join(COLUMNS)}")
    out = pd.DataFrame({
        "ts": pd.to_datetime(frame["ts"], utc=True).astype("datetime64[ns, UTC]"),
        "cluster": frame["cluster"].astype(str) if "cluster" in frame else "",
        "host": frame["host"].astype(str),
        "gpu": frame["gpu"].astype("int16"),
        "uuid": frame["uuid"].fillna("").astype(str) if "uuid" in frame else "",
        "field": frame["field"].astype("int32"),
        "value": frame["value"].astype("float64"),
    })
    bad = ~np.isfinite(out["value"].to_numpy())
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"telemetry values must be finite numbers; row {first} has {out['value'].iloc[first]}")
    return out.reset_index(drop=True)


def deduplicate(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep the last row for each sample key (the batch's own repeats: last write wins).

    The key columns are packed into one integer per series and sorted with the timestamps, which is
    several times faster than ``drop_duplicates`` on the string columns of a large batch."""
    if len(frame) < 2:
        return frame
    series = np.zeros(len(frame), dtype=np.int64)
    for column in ("cluster", "host", "gpu", "field"):
        codes, uniques = pd.factorize(frame[column], sort=False)
        series = series * len(uniques) + codes
    ts = frame["ts"].dt.as_unit("ns").astype("int64").to_numpy()
    order = np.lexsort((ts, series))  # stable: equal keys stay in batch order
    sorted_series, sorted_ts = series[order], ts[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (sorted_series[1:] != sorted_series[:-1]) | (sorted_ts[1:] != sorted_ts[:-1])
    if last.all():
        return frame
    return frame.iloc[np.sort(order[last])].reset_index(drop=True)


def sort_samples(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["cluster", "host", "gpu", "field", "ts"], kind="stable").reset_index(drop=True)


def step_seconds(step) -> int:
    seconds = step.total_seconds() if isinstance(step, timedelta) else float(step)
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"bucket step must be a whole number of seconds >= 1, not {seconds}")
    return int(seconds)


def bucket_start(ts: pd.Series, step: int) -> pd.Series:
    """Buckets aligned to the Unix epoch, so every backend and every query agree on their edges."""
    nanos = pd.to_datetime(ts, utc=True).dt.as_unit("ns").astype("int64")
    return pd.Series(utc_from_ns((nanos - nanos % (step * 1_000_000_000)).to_numpy()), index=nanos.index)


def aggregate_frame(frame: pd.DataFrame, step, stats=DEFAULT_STATS) -> pd.DataFrame:
    """Reference aggregation in pandas: per epoch-aligned bucket of ``step`` seconds and sample
    series, the count and the requested ``stats`` (mean, min, max; p10, p50, p90 with linear
    interpolation). Backends may compute it natively but must give the same numbers; their rows may
    come in any order (sort with ``sort_aggregate`` when order matters), this one's are sorted."""
    step = step_seconds(step)
    stats = check_stats(stats)
    columns = ["bucket", "cluster", "host", "gpu", "field", "count", *stats]
    if frame.empty:
        out = pd.DataFrame({column: pd.Series(dtype="float64") for column in columns})
        out["bucket"] = pd.Series(dtype="datetime64[ns, UTC]")
        return out
    work = frame.assign(bucket=bucket_start(frame["ts"], step))
    grouped = work.groupby(["bucket", "cluster", "host", "gpu", "field"], sort=True, observed=True)["value"]
    out = grouped.agg(count="count", **{name: name for name in stats if name in ("mean", "min", "max")})
    for name in stats:
        if name in PERCENTILES:
            out[name] = grouped.quantile(PERCENTILES[name])
    out["count"] = out["count"].astype("int64")
    return out.reset_index()[columns]


def sort_aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["bucket", "cluster", "host", "gpu", "field"], kind="stable", ignore_index=True)


def check_stats(stats) -> tuple[str, ...]:
    stats = tuple(stats)
    unknown = [name for name in stats if name not in STATS]
    if unknown:
        raise ValueError(f"unknown statistic(s) {', '.join(unknown)}; choose from {', '.join(STATS)}")
    return tuple(name for name in STATS if name in stats)


def latest_frame(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    ordered = frame.sort_values("ts", kind="stable")
    return sort_samples(ordered.drop_duplicates(subset=["cluster", "host", "gpu", "field"], keep="last"))


class TelemetryBackend(ABC):
    """A telemetry store. Options come from ``TELEMETRY_BACKENDS[alias]["OPTIONS"]``."""

    name = "telemetry store"

    def __init__(self, **options):
        self.options = options

    @abstractmethod
    def write(self, frame: pd.DataFrame) -> int:
        """Store canonical samples; a sample with an existing key replaces it. Returns rows written."""

    @abstractmethod
    def read(self, query: Query) -> pd.DataFrame:
        """Raw samples in the window, sorted by (cluster, host, gpu, field, ts)."""

    def aggregate(self, query: Query, step, stats=DEFAULT_STATS) -> pd.DataFrame:
        """Per bucket of ``step`` seconds (aligned to the epoch) and sample series: the count and
        ``stats`` (any of mean, min, max, p10, p50, p90). Rows come in no particular order."""
        return aggregate_frame(self.read(query), step, stats)

    def latest(self, query: Query) -> pd.DataFrame:
        """The last sample of each (cluster, host, gpu, field) in the window."""
        return latest_frame(self.read(query))

    @abstractmethod
    def delete(self, query: Query) -> int:
        """Remove the samples in the window (retention, demo reset). Returns rows removed."""

    def check(self) -> str:
        """One line saying the store is usable; raises TelemetryUnavailable otherwise."""
        return f"{self.name}: ok"

    def close(self) -> None:
        """Release connections (tests, shutdown)."""

