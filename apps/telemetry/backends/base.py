"""The telemetry store interface and its canonical table.

Every backend takes and returns one canonical pandas table, long format, one row per sample:

    ts (datetime64[ns, UTC]) | cluster | host | gpu (int16) | uuid | field (int32, DCGM id) | value (float64)

Samples are identified by (cluster, host, gpu, field, ts): writing the same key again replaces the
value, so re-sending a batch changes nothing. Backends are chosen by the ``TELEMETRY_BACKENDS``
setting (see ``apps/telemetry/store.py``) and share one contract test suite
(``tests/telemetry/contract.py``).

Beside the GPU samples every backend keeps job-scoped application series (what a training run
says about itself: tokens/s, loss, checkpoint markers), in a second canonical table kept apart
from the samples (a GPU read never returns them, nor the other way round):

    ts (datetime64[ns, UTC]) | cluster | job_id (int64) | name | step (Int64, <NA> unknown) | value (float64)

identified by (cluster, job_id, name, ts); ``canonical_app`` validates a frame into that shape.
Plain Python: no Django.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
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

APP_COLUMNS = ["ts", "cluster", "job_id", "name", "step", "value"]
APP_KEY = ["cluster", "job_id", "name", "ts"]
APP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:/-]{0,63}")
APP_NAME_RULE = "a letter, then at most 63 letters, digits or _ . : / -"


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


# -- job-scoped application series --------------------------------------------------------------


def empty_app_frame() -> pd.DataFrame:
    """No job series, with the canonical columns and dtypes."""
    return pd.DataFrame({
        "ts": pd.Series(dtype="datetime64[ns, UTC]"), "cluster": pd.Series(dtype=object),
        "job_id": pd.Series(dtype="int64"), "name": pd.Series(dtype=object), "step": pd.Series(dtype="Int64"),
        "value": pd.Series(dtype="float64")})[APP_COLUMNS]


def canonical_app(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a canonical job-series table, rows in the given order and numbered from 0.

    ``ts``: datetimes or ISO 8601 text (naive means UTC); numbers are refused, since seconds,
    milliseconds and nanoseconds look alike. ``cluster``: non-empty text. ``job_id``: an integer
    >= 0. ``name``: ``APP_NAME`` (a letter, then up to 63 of letters, digits, ``_ . : / -``).
    ``step`` (optional column): an integer >= 0, or None/NaN/<NA> for unknown. ``value``: a finite
    number. cluster and name come back as object columns of ``str``. Raises ValueError naming the
    first bad row and column, so nothing of a bad batch is written."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"job series must be a pandas DataFrame, not {type(frame).__name__}")
    missing = [column for column in APP_COLUMNS if column not in frame.columns and column != "step"]
    if missing:
        raise ValueError(f"job series frame lacks column(s) {', '.join(missing)}; needs {', '.join(APP_COLUMNS)} "
                         "(step may be left out)")
    if frame.empty:
        return empty_app_frame()
    frame = frame.reset_index(drop=True)
    out = pd.DataFrame({
        "ts": _app_times(frame["ts"]),
        "cluster": _app_text(frame["cluster"], "cluster", lambda v: bool(v.strip()), "is not a cluster name (empty)"),
        "job_id": _app_integers(frame["job_id"], "job_id", nullable=False).astype("int64"),
        "name": _app_text(frame["name"], "name", lambda v: APP_NAME.fullmatch(v) is not None,
                          f"is not a series name ({APP_NAME_RULE})"),
        "step": (_app_integers(frame["step"], "step", nullable=True) if "step" in frame.columns
                 else pd.array([pd.NA] * len(frame), dtype="Int64")),
        "value": _app_values(frame["value"]),
    })
    return out[APP_COLUMNS]


def _bad_row(column: str, row: int, value, problem: str) -> ValueError:
    if isinstance(value, np.generic):
        value = value.item()  # 1.0, not np.float64(1.0)
    return ValueError(f"job series row {row}, column {column!r}: {value!r} {problem}")


def _first(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask, dtype=bool))[0])


def _app_times(column: pd.Series) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        parsed = pd.to_datetime(column, utc=True)
    elif pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        raise _bad_row("ts", 0, column.iloc[0], "is a number, not a time; give a datetime or ISO 8601 text")
    else:
        numbers = column.map(lambda v: isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                             and not pd.isna(v)).to_numpy(bool)
        if numbers.any():
            row = _first(numbers)
            raise _bad_row("ts", row, column.iloc[row], "is a number, not a time; give a datetime or ISO 8601 text")
        parsed = pd.to_datetime(column, utc=True, errors="coerce", format="ISO8601")
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        raise _bad_row("ts", row, None if pd.isna(value) else value,
                       "is missing" if pd.isna(value) else "is not a time (ISO 8601, e.g. 2026-11-21T10:00:00Z)")
    try:
        return parsed.astype("datetime64[ns, UTC]")
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        limits = (pd.Timestamp.min.tz_localize("UTC"), pd.Timestamp.max.tz_localize("UTC"))
        row = _first((parsed < limits[0]) | (parsed > limits[1]))
        raise _bad_row("ts", row, column.iloc[row], "is outside the years 1677-2262") from None


def _app_text(column: pd.Series, name: str, valid, problem: str) -> pd.Series:
    wrong = {value for value in pd.unique(column.to_numpy(object)) if isinstance(value, str) and not valid(value)}
    bad = column.map(lambda v: not isinstance(v, str) or v in wrong).to_numpy(bool)
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        if isinstance(value, str):
            raise _bad_row(name, row, value, problem)
        raise _bad_row(name, row, None if pd.isna(value) else value, "is missing" if pd.isna(value) else "is not text")
    return pd.Series(column.to_numpy(object), dtype=object)


def _app_integers(column: pd.Series, name: str, *, nullable: bool) -> pd.Series:
    absent = column.isna().to_numpy()
    if absent.any() and not nullable:
        row = _first(absent)
        raise _bad_row(name, row, None, "is missing")
    if pd.api.types.is_bool_dtype(column.dtype):
        raise _bad_row(name, 0, column.iloc[0], "is not an integer")
    numbers = pd.to_numeric(column, errors="coerce")
    as_float = numbers.to_numpy(dtype="float64", na_value=np.nan)
    not_number = np.isnan(as_float) & ~absent
    if not_number.any():
        row = _first(not_number)
        raise _bad_row(name, row, column.iloc[row], "is not an integer")
    finite = np.where(absent, 0.0, as_float)
    wrong = ~np.isfinite(finite) | (finite != np.floor(finite)) | (finite < 0)
    if wrong.any():
        row = _first(wrong)
        raise _bad_row(name, row, column.iloc[row], "is not an integer >= 0")
    if pd.api.types.is_integer_dtype(numbers.dtype):
        values = numbers.to_numpy("int64", na_value=0)  # exact beyond 2**53, where a float would round
    else:
        values = finite.astype("int64")
    result = pd.array(values, dtype="Int64")
    result[absent] = pd.NA
    return pd.Series(result)


def _app_values(column: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(column.dtype):
        raise _bad_row("value", 0, column.iloc[0], "is not a number")
    numbers = pd.to_numeric(column, errors="coerce")
    values = numbers.to_numpy(dtype="float64", na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            raise _bad_row("value", row, value, "must be a finite number")
        if value is None or value is pd.NA:
            raise _bad_row("value", row, None, "is missing")
        raise _bad_row("value", row, value, "is not a number")
    return pd.Series(values, dtype="float64")


def deduplicate_app(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep the last row for each (cluster, job_id, name, ts) of a canonical batch: last write wins."""
    if len(frame) < 2:
        return frame
    return frame.drop_duplicates(subset=APP_KEY, keep="last", ignore_index=True)


def sort_app(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["cluster", "job_id", "name", "ts"], kind="stable", ignore_index=True)


def app_names(names) -> tuple[str, ...] | None:
    """The ``names`` filter of ``read_job_series``: None (every series), one name, or several."""
    if names is None:
        return None
    if isinstance(names, str):
        return (names,)
    if not isinstance(names, Iterable):
        raise TypeError(f"names must be a series name or a list of them, not {type(names).__name__}")
    return tuple(str(name) for name in names)


def app_window(start=None, end=None) -> tuple[int | None, int | None]:
    """``[start, end)`` of ``read_job_series`` as nanoseconds since the epoch (None: open); naive
    times are UTC. Raises ValueError for an unparseable time or an empty window."""
    bounds = []
    for label, moment in (("start", start), ("end", end)):
        if moment is None:
            bounds.append(None)
            continue
        try:
            stamp = pd.Timestamp(moment)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"job series {label} {moment!r} is not a time: {exc}") from None
        if pd.isna(stamp):
            bounds.append(None)
            continue
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        bounds.append(int(stamp.as_unit("ns").value))
    if bounds[0] is not None and bounds[1] is not None and bounds[1] <= bounds[0]:
        raise ValueError(f"job series window is empty: end {pd.Timestamp(bounds[1], tz='UTC')} is not after "
                         f"start {pd.Timestamp(bounds[0], tz='UTC')}")
    return bounds[0], bounds[1]


def app_frame_from_columns(ts_ns, cluster, job_id, name, step, value) -> pd.DataFrame:
    """A canonical job-series frame from what a store gives back (step: None, NaN or masked for unknown)."""
    if len(ts_ns) == 0:
        return empty_app_frame()
    return pd.DataFrame({
        "ts": utc_from_ns(ts_ns), "cluster": pd.Series(cluster, dtype=object),
        "job_id": np.asarray(job_id, dtype="int64"), "name": pd.Series(name, dtype=object),
        "step": pd.array(step, dtype="Int64"),
        "value": np.asarray(value, dtype="float64")})[APP_COLUMNS]


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

    # Job-scoped application series (the second canonical table, ``APP_COLUMNS``). Not abstract, so
    # that a site's own backend written before them still loads; it says plainly that it lacks them.

    def write_job_series(self, frame: pd.DataFrame) -> int:
        """Store canonical job series (``canonical_app`` validates first: a bad row writes nothing);
        a point with an existing (cluster, job_id, name, ts) replaces it, repeats inside the batch
        keep the last. Returns the points written."""
        raise self._no_job_series()

    def read_job_series(self, cluster: str, job_id: int, names=None, start=None, end=None) -> pd.DataFrame:
        """One job's series, sorted by (name, ts): only ``names`` (one name or several) when given,
        only ``start <= ts < end`` (either may be None; naive times are UTC)."""
        raise self._no_job_series()

    def delete_job_series(self, cluster: str, job_id: int | None = None) -> int:
        """Remove one job's series, or with ``job_id`` None every job's of the cluster. Returns the
        points removed."""
        raise self._no_job_series()

    def _no_job_series(self) -> TelemetryUnavailable:
        return TelemetryUnavailable(f"{self.name} ({type(self).__name__}) keeps no job series: it does not "
                                    "implement write_job_series/read_job_series/delete_job_series")

    def check(self) -> str:
        """One line saying the store is usable; raises TelemetryUnavailable otherwise."""
        return f"{self.name}: ok"

    def close(self) -> None:
        """Release connections (tests, shutdown)."""

