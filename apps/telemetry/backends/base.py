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

A third table holds network samples (Slingshot NIC and switch-port counters, ``netfields``):

    ts (datetime64[ns, UTC]) | cluster | host | nic | field (canonical name) | value (float64)

identified by ``NET_KEY`` (cluster, host, nic, field, ts); ``canonical_net`` validates. Counters are
stored cumulative, exactly as the driver or fabric manager reports them.

Host samples (``hostfields``: CPU shares, memory, page cache in GPU memory, job steps' CPU) live in
that table too, under their own ``host_*`` field names with the domain (``node``, ``numaN``, ``gpuN``,
``job<id>.<step>``) in ``nic``; ``write_host``/``read_host``/``aggregate_host`` speak of it as
``domain`` (``HOST_COLUMNS``) and only ever touch host fields, and every network read names its
fields, so neither sees the other's rows. Every backend with network samples has them.
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

from .. import hostfields
from ..retention import Expiry, Retention, TierError  # noqa: F401 - re-exported for backends

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

NET_COLUMNS = ["ts", "cluster", "host", "nic", "field", "value"]
NET_KEY = ["cluster", "host", "nic", "field", "ts"]
NET_AGGREGATE_COLUMNS = ["bucket", "cluster", "host", "nic", "field", "count", "first", "last", "min", "max"]
NET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}")
NET_NAME_RULE = "a letter or digit, then at most 63 letters, digits or _ . : / -"
NET_FIELD = re.compile(r"[a-z][a-z0-9_]{0,63}")
NET_FIELD_RULE = "a lower-case letter, then at most 63 lower-case letters, digits or _"
HOST_COLUMNS = ["ts", "cluster", "host", "domain", "field", "value"]
HOST_AGGREGATE_COLUMNS = ["bucket", "cluster", "host", "domain", "field", "count", "first", "last", "min", "max"]


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


def _bad_row(column: str, row: int, value, problem: str, what: str = "job series") -> ValueError:
    if isinstance(value, np.generic):
        value = value.item()  # 1.0, not np.float64(1.0)
    return ValueError(f"{what} row {row}, column {column!r}: {value!r} {problem}")


def _first(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask, dtype=bool))[0])


def _app_times(column: pd.Series, what: str = "job series") -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(column.dtype):
        parsed = pd.to_datetime(column, utc=True)
    elif pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        raise _bad_row("ts", 0, column.iloc[0], "is a number, not a time; give a datetime or ISO 8601 text", what=what)
    else:
        numbers = column.map(lambda v: isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                             and not pd.isna(v)).to_numpy(bool)
        if numbers.any():
            row = _first(numbers)
            raise _bad_row("ts", row, column.iloc[row], "is a number, not a time; give a datetime or ISO 8601 text", what=what)
        parsed = pd.to_datetime(column, utc=True, errors="coerce", format="ISO8601")
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        raise _bad_row("ts", row, None if pd.isna(value) else value,
                       "is missing" if pd.isna(value) else "is not a time (ISO 8601, e.g. 2026-11-21T10:00:00Z)", what=what)
    try:
        return parsed.astype("datetime64[ns, UTC]")
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        limits = (pd.Timestamp.min.tz_localize("UTC"), pd.Timestamp.max.tz_localize("UTC"))
        row = _first((parsed < limits[0]) | (parsed > limits[1]))
        raise _bad_row("ts", row, column.iloc[row], "is outside the years 1677-2262", what=what) from None


def _app_text(column: pd.Series, name: str, valid, problem: str, what: str = "job series") -> pd.Series:
    wrong = {value for value in pd.unique(column.to_numpy(object)) if isinstance(value, str) and not valid(value)}
    bad = column.map(lambda v: not isinstance(v, str) or v in wrong).to_numpy(bool)
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        if isinstance(value, str):
            raise _bad_row(name, row, value, problem, what=what)
        raise _bad_row(name, row, None if pd.isna(value) else value, "is missing" if pd.isna(value) else "is not text", what=what)
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


def _app_values(column: pd.Series, what: str = "job series") -> pd.Series:
    if pd.api.types.is_bool_dtype(column.dtype):
        raise _bad_row("value", 0, column.iloc[0], "is not a number", what=what)
    numbers = pd.to_numeric(column, errors="coerce")
    values = numbers.to_numpy(dtype="float64", na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        row = _first(bad)
        value = column.iloc[row]
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            raise _bad_row("value", row, value, "must be a finite number", what=what)
        if value is None or value is pd.NA:
            raise _bad_row("value", row, None, "is missing", what=what)
        raise _bad_row("value", row, value, "is not a number", what=what)
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


def app_window(start=None, end=None, what: str = "job series") -> tuple[int | None, int | None]:
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
            raise ValueError(f"{what} {label} {moment!r} is not a time: {exc}") from None
        if pd.isna(stamp):
            bounds.append(None)
            continue
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        bounds.append(int(stamp.as_unit("ns").value))
    if bounds[0] is not None and bounds[1] is not None and bounds[1] <= bounds[0]:
        raise ValueError(f"{what} window is empty: end {pd.Timestamp(bounds[1], tz='UTC')} is not after "
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


# -- network samples (NIC and switch-port counters) -----------------------------------------------


def empty_net_frame() -> pd.DataFrame:
    """No network samples, with the canonical columns and dtypes."""
    frame = pd.DataFrame({column: pd.Series(dtype=object) for column in NET_COLUMNS})
    frame["ts"] = pd.Series(dtype="datetime64[ns, UTC]")
    frame["value"] = pd.Series(dtype="float64")
    return frame[NET_COLUMNS]


def canonical_net(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a canonical network-sample table, rows in the given order and numbered from 0.

    ``ts``: datetimes or ISO 8601 text (naive means UTC); numbers are refused, as for job series.
    ``cluster``: non-empty text. ``host`` (node name or switch xname) and ``nic`` (``hsn0``, or a
    switch port such as ``j17``): ``NET_NAME`` (a letter or digit, then up to 63 of letters, digits,
    ``_ . : / -``). ``field``: ``NET_FIELD`` (a canonical name of ``netfields``: lower case, digits,
    ``_``; the store does not check the registry, ingestion does). ``value``: a finite number.
    Raises ValueError naming the first bad row and column, so nothing of a bad batch is written."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"network samples must be a pandas DataFrame, not {type(frame).__name__}")
    missing = [column for column in NET_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"network sample frame lacks column(s) {', '.join(missing)}; needs {', '.join(NET_COLUMNS)}")
    if frame.empty:
        return empty_net_frame()
    frame = frame.reset_index(drop=True)
    what = "network sample"
    out = pd.DataFrame({
        "ts": _app_times(frame["ts"], what=what),
        "cluster": _app_text(frame["cluster"], "cluster", lambda v: bool(v.strip()), "is not a cluster name (empty)",
                             what=what),
        "host": _app_text(frame["host"], "host", lambda v: NET_NAME.fullmatch(v) is not None,
                          f"is not a host or switch name ({NET_NAME_RULE})", what=what),
        "nic": _app_text(frame["nic"], "nic", lambda v: NET_NAME.fullmatch(v) is not None,
                         f"is not a NIC or port name ({NET_NAME_RULE})", what=what),
        "field": _app_text(frame["field"], "field", lambda v: NET_FIELD.fullmatch(v) is not None,
                           f"is not a network field name ({NET_FIELD_RULE})", what=what),
        "value": _app_values(frame["value"], what=what),
    })
    return out[NET_COLUMNS]


def deduplicate_net(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep the last row for each ``NET_KEY`` of a canonical batch: last write wins."""
    if len(frame) < 2:
        return frame
    return frame.drop_duplicates(subset=NET_KEY, keep="last", ignore_index=True)


def sort_net(frame: pd.DataFrame) -> pd.DataFrame:
    """What ``read_net`` answers: sorted by host, nic, field, ts (one cluster per read)."""
    return frame.sort_values(["cluster", "host", "nic", "field", "ts"], kind="stable", ignore_index=True)


def net_filter(values, label: str) -> tuple[str, ...] | None:
    """A ``hosts``/``nics``/``fields`` filter of the network reads: None (all), one name, or several."""
    if values is None:
        return None
    if isinstance(values, str):
        return (values,)
    if not isinstance(values, Iterable):
        raise TypeError(f"{label} must be a name or a list of them, not {type(values).__name__}")
    return tuple(str(value) for value in values)


def net_window(start=None, end=None) -> tuple[int | None, int | None]:
    """``[start, end)`` of the network reads as nanoseconds (None: open); naive times are UTC."""
    return app_window(start, end, what="network samples")


def net_frame_from_columns(ts_ns, cluster, host, nic, field, value) -> pd.DataFrame:
    """A canonical network-sample frame from what a store gives back."""
    if len(ts_ns) == 0:
        return empty_net_frame()
    return pd.DataFrame({
        "ts": utc_from_ns(ts_ns), "cluster": pd.Series(cluster, dtype=object), "host": pd.Series(host, dtype=object),
        "nic": pd.Series(nic, dtype=object), "field": pd.Series(field, dtype=object),
        "value": np.asarray(value, dtype="float64")})[NET_COLUMNS]


def select_net(frame: pd.DataFrame, cluster: str, hosts=None, nics=None, fields=None, start=None,
               end=None) -> pd.DataFrame:
    """The rows of a canonical frame a network read selects (reference for the backends)."""
    lo, hi = net_window(start, end)
    mask = (frame["cluster"] == str(cluster)).to_numpy()
    for column, values in (("host", net_filter(hosts, "hosts")), ("nic", net_filter(nics, "nics")),
                           ("field", net_filter(fields, "fields"))):
        if values is not None:
            mask &= frame[column].isin(values).to_numpy()
    nanos = frame["ts"].astype("int64").to_numpy()
    if lo is not None:
        mask &= nanos >= lo
    if hi is not None:
        mask &= nanos < hi
    return sort_net(frame[mask])


def empty_net_aggregate() -> pd.DataFrame:
    out = pd.DataFrame({column: pd.Series(dtype="float64") for column in NET_AGGREGATE_COLUMNS})
    for column in ("cluster", "host", "nic", "field"):
        out[column] = pd.Series(dtype=object)
    out["bucket"] = pd.Series(dtype="datetime64[ns, UTC]")
    out["count"] = pd.Series(dtype="int64")
    return out


def aggregate_net_frame(frame: pd.DataFrame, step) -> pd.DataFrame:
    """Reference aggregation of network samples in pandas: per epoch-aligned bucket of ``step``
    seconds and (cluster, host, nic, field), the count, the value of the earliest and of the latest
    sample (``first``, ``last``), min and max. Sorted by bucket, cluster, host, nic, field. Backends
    may compute it natively but must give the same numbers (their rows may come in any order: sort
    with ``sort_net_aggregate``)."""
    step = step_seconds(step)
    if frame.empty:
        return empty_net_aggregate()
    work = frame.assign(bucket=bucket_start(frame["ts"], step)).sort_values("ts", kind="stable")
    grouped = work.groupby(["bucket", "cluster", "host", "nic", "field"], sort=True, observed=True)["value"]
    out = grouped.agg(count="count", first="first", last="last", min="min", max="max").reset_index()
    out["count"] = out["count"].astype("int64")
    for column in ("cluster", "host", "nic", "field"):
        out[column] = out[column].astype(object)
    return out[NET_AGGREGATE_COLUMNS]


def sort_net_aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["bucket", "cluster", "host", "nic", "field"], kind="stable", ignore_index=True)


def host_field_filter(fields) -> tuple[str, ...]:
    """The fields of a host read: every host field when None; a name that is not one is a ValueError."""
    if fields is None:
        return hostfields.HOST_FIELD_NAMES
    chosen = net_filter(fields, "fields")
    for name in chosen:
        hostfields.lookup_host(name)
    return chosen


def host_as_net(frame: pd.DataFrame) -> pd.DataFrame:
    """A host-sample frame (``HOST_COLUMNS``) as network rows, every domain and field checked first."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"host samples must be a pandas DataFrame, not {type(frame).__name__}")
    missing = [column for column in HOST_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"host sample frame lacks column(s) {', '.join(missing)}; needs {', '.join(HOST_COLUMNS)}")
    frame = frame.reset_index(drop=True)
    for index, (domain, field) in enumerate(zip(frame["domain"], frame["field"])):
        problem = hostfields.check_host_sample(domain, field)
        if problem is not None:
            raise ValueError(f"host sample row {index}, column {'domain' if hostfields.domain_kind(domain) is None else 'field'!r}: "
                             f"{problem}")
    return frame.rename(columns={"domain": "nic"})[NET_COLUMNS]


class TelemetryBackend(ABC):
    """A telemetry store. Options come from ``TELEMETRY_BACKENDS[alias]["OPTIONS"]``."""

    name = "telemetry store"

    def __init__(self, **options):
        self.options = options
        # Tiers (issue 40, ``retention.py``): option ``retention`` = {"raw_days", "m1_days", "m10_days"}.
        self.retention = Retention.from_options(options.get("retention"))
        self.clock = None  # tests set a callable returning "now" (a datetime); None: the real time

    def now(self) -> datetime:
        """The store's idea of now (tiers' horizons are counted from it)."""
        return self.clock() if self.clock is not None else datetime.now(timezone.utc)

    def expire(self, now=None, dry_run: bool = False, progress=None) -> list[Expiry]:
        """The retention pass: remove every partition (a day table, a daily index) of every tier that lies wholly
        before the tier's horizon at ``now`` (default: ``self.now()``), building the rollups of what raw samples
        would go first. ``dry_run``: only say what would go. ``progress(done, total, expiry)`` after each item.
        Idempotent; returns what went (or would go)."""
        return []

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

    # Network samples (the third canonical table, ``NET_COLUMNS``: NIC and switch-port counters).
    # Not abstract either, for the same reason: a backend without them says so by name.

    def write_net(self, frame: pd.DataFrame) -> int:
        """Store canonical network samples (``canonical_net`` validates first: a bad row writes
        nothing); a sample with an existing ``NET_KEY`` replaces it, repeats inside the batch keep
        the last. Returns the samples written."""
        raise self._no_net()

    def read_net(self, cluster: str, hosts=None, nics=None, fields=None, start=None, end=None) -> pd.DataFrame:
        """Network samples of one cluster in ``[start, end)`` (either may be None; naive times are
        UTC), only the given hosts, NICs/ports and fields (each None, one name or several), as
        ``NET_COLUMNS`` sorted by host, nic, field, ts."""
        raise self._no_net()

    def aggregate_net(self, cluster: str, step, hosts=None, nics=None, fields=None, start=None,
                      end=None) -> pd.DataFrame:
        """Per epoch-aligned bucket of ``step`` seconds and (host, nic, field): count, first, last,
        min, max (``NET_AGGREGATE_COLUMNS``; first/last are the values of the earliest and latest
        sample of the bucket, enough to turn counters into rates). Rows in no particular order."""
        return aggregate_net_frame(self.read_net(cluster, hosts, nics, fields, start, end), step)

    def delete_net(self, cluster: str, hosts=None) -> int:
        """Remove the network samples of a cluster (only of ``hosts`` when given). Returns rows removed."""
        raise self._no_net()

    # Host samples (``hostfields``), kept in the network table under their own field names.

    def write_host(self, frame: pd.DataFrame) -> int:
        """Store host samples (``HOST_COLUMNS``); a row whose domain or field is not a host one is a
        ValueError naming it, and nothing is written. Returns the samples written."""
        frame = host_as_net(frame)
        return self.write_net(frame)

    def read_host(self, cluster: str, hosts=None, domains=None, fields=None, start=None, end=None) -> pd.DataFrame:
        """Host samples of one cluster (``HOST_COLUMNS``, sorted by host, domain, field, ts); ``fields``
        None means every host field, never a network one."""
        out = self.read_net(cluster, hosts, domains, host_field_filter(fields), start, end)
        return out.rename(columns={"nic": "domain"})

    def aggregate_host(self, cluster: str, step, hosts=None, domains=None, fields=None, start=None,
                       end=None) -> pd.DataFrame:
        """Per epoch-aligned bucket: count, first, last, min, max of host samples (``HOST_AGGREGATE_COLUMNS``)."""
        out = self.aggregate_net(cluster, step, hosts, domains, host_field_filter(fields), start, end)
        return out.rename(columns={"nic": "domain"})

    def _no_net(self) -> TelemetryUnavailable:
        return TelemetryUnavailable(f"{self.name} ({type(self).__name__}) keeps no network samples: it does not "
                                    "implement write_net/read_net/delete_net")

    def check(self) -> str:
        """One line saying the store is usable; raises TelemetryUnavailable otherwise."""
        return f"{self.name}: ok"

    def close(self) -> None:
        """Release connections (tests, shutdown)."""

