"""Lustre job statistics: ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats`` text -> job series, and the
series -> per-bucket I/O rates of a job.

Plain Python: no Django.

**The text** (Lustre's ``lprocfs_jobstats.c``, ``lprocfs_stats_header`` of ``lprocfs_status.c``)::

    obdfilter.scratch-OST0003.job_stats=
    job_stats:
    - job_id:          alps.1200772
      snapshot_time:   1764000000.123456789 secs.nsecs
      start_time:      1763990000.000000000 secs.nsecs
      elapsed_time:    10000.123456789 secs.nsecs
      read_bytes:      { samples:           4, unit: bytes, min:     4096, max:  1048576, sum:          2101248, sumsq: 0, hist: { 4K: 2, 1M: 2 } }
      write_bytes:     { samples:          10, unit: bytes, min:     4096, max:  4194304, sum:         41943040, sumsq: 0 }
      getattr:         { samples:           0, unit:  usecs, min: 0, max: 0, sum: 0, sumsq: 0 }

One ``<kind>.<target>.job_stats=`` header per target (``lctl get_param`` prints the parameter's name, then its
multi-line value), a ``job_stats:`` line, then one list item per job. Older releases print ``snapshot_time`` in
whole seconds and no ``start_time``/``elapsed_time``, leave out ``sumsq``, ``hist`` and the units, or give
operations in ``reqs`` rather than ``usecs``: every one of those is read. A job id with characters outside
``[A-Za-z0-9.@-_:/]``, with a ``:`` or starting with ``@`` is printed in double quotes with ``\\xHH`` escapes.

**Job ids.** The site's ``jobid_name`` decides what the job id is. Read as a Slurm job: ``<cluster>.<id>``,
``<cluster>:<id>``, ``<cluster>_<id>``, ``<cluster>-<id>`` (``jobid_name=alps.%j``) and a bare ``<id>``
(``jobid_var=SLURM_JOB_ID``: the cluster is the one the import names). Other ids (``cp.0`` of ``%e.%u``, a
login node's ``bash.1234``) are not a job of this portal: counted and said once, not errors.

**The series** (``APP_COLUMNS``; step unknown; the values cumulative as Lustre prints them, at the time of the
reading): ``lustre/<target>/read_bytes`` and ``write_bytes`` (the ``sum``), ``read_ops`` and ``write_ops`` (their
``samples``), and every other operation under its own name with its count (``lustre/scratch-MDT0000/open``).
The OSTs' ``read``/``write`` latency counters repeat read_ops/write_ops and are left out.

**Rates** (:func:`job_io`): each series' counter made monotone again where it went back (an entry that expired
after ``job_cleanup_interval`` or was cleared restarts from zero: the new value is what came since), spread
linearly between readings, differenced at the bucket edges and summed over targets. Never negative.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

import numpy as np
import pandas as pd

from apps.core.timebounds import MAX_BUCKETS, capped_step

from .backends.base import APP_COLUMNS, APP_NAME, app_frame_from_columns

PREFIX = "lustre/"
MAX_LINE_CHARS = 8192  # a job_stats line is ~200 characters (with a histogram, a few hundred)
MAX_ERRORS = 1000  # errors kept (the API reports fewer); the count goes on
BYTE_STATS = ("read_bytes", "write_bytes")
SKIPPED_STATS = ("read", "write")  # OST latency counters: their counts are read_ops / write_ops again
RATE_COLUMNS = ["read_bytes_per_s", "write_bytes_per_s", "read_ops_per_s", "write_ops_per_s", "metadata_ops_per_s"]
TOTAL_KEYS = ["read_bytes", "write_bytes", "read_ops", "write_ops", "metadata_ops"]

_HEADER = re.compile(r"^(?P<kind>[A-Za-z][\w-]*)\.(?P<target>[^\s=]+?)\.job_stats=\s*(?P<rest>\S.*)?$")
_ITEM = re.compile(r"^-\s+job_id:\s*(?P<value>.*?)\s*$")
_TIME = re.compile(r"^\s+(?P<key>snapshot_time|start_time|elapsed_time):\s*(?P<value>\S+)(?:\s+secs(?:\.nsecs)?)?\s*$")
_STAT = re.compile(r"^\s+(?P<name>[A-Za-z][A-Za-z0-9_]*):\s*\{(?P<body>.*)\}\s*$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_JOB = re.compile(r"^(?:(?P<cluster>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*?)[.:_-])?(?P<id>[0-9]{1,18})$")
_MDT = re.compile(r"-MDT[0-9a-fA-F]{4}$")
_TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")


@dataclass
class ParseResult:
    """What the text gave: the rows (``frame``), the entries read, the problems by line, and the entries whose job
    id is not a Slurm job (id -> count)."""

    frame: pd.DataFrame
    entries: int = 0
    rows: int = 0
    errors: list[dict] = field(default_factory=list)
    error_count: int = 0
    not_jobs: dict[str, int] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)

    @property
    def jobs(self) -> list[tuple[str, int]]:
        if self.frame.empty:
            return []
        pairs = self.frame[["cluster", "job_id"]].drop_duplicates().itertuples(index=False)
        return sorted((str(c), int(j)) for c, j in pairs)

    def not_jobs_words(self) -> str:
        """One sentence for the entries that are not Slurm jobs ("" when none)."""
        if not self.not_jobs:
            return ""
        shown = ", ".join(sorted(self.not_jobs)[:5]) + (" …" if len(self.not_jobs) > 5 else "")
        total = sum(self.not_jobs.values())
        return (f"{total} entr{'y' if total == 1 else 'ies'} with a job id that is not a Slurm job ({shown}) skipped: "
                "with jobid_var=SLURM_JOB_ID (or jobid_name=<cluster>.%j) every job's I/O is attributed")


def error_words(error: dict) -> str:
    """"line 14: write_bytes: sum: 'x1' is not a whole number"."""
    return f"line {error['line']}: {error['message']}" if error.get("line") else str(error.get("message"))


def job_ref(text: str, cluster: str, clusters=None) -> tuple[str, int] | None:
    """(cluster, job id) of a Lustre job id, or None when it is not a Slurm job. A prefix must be one of
    ``clusters`` (default: ``cluster``): ``cp.0`` of ``jobid_name=%e.%u`` looks like ``<cluster>.<id>`` too."""
    found = _JOB.match(text)
    if not found:
        return None
    prefix = found.group("cluster")
    if prefix is not None and prefix not in (clusters if clusters is not None else {cluster}):
        return None
    return (prefix or cluster), int(found.group("id"))


def _unquote(value: str) -> str:
    """A job id as printed: bare, or in double quotes with \\xHH escapes."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        return re.sub(r"\\x([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), inner)
    return value


def _stat_fields(body: str) -> dict[str, str]:
    """``samples: 4, unit: bytes, min: ..., hist: { 4K: 2 }`` -> {"samples": "4", "unit": "bytes", ...} (the
    histogram is left out: its commas are inside its own braces)."""
    hist = body.find("hist:")
    if hist >= 0:
        body = body[:hist]
    out = {}
    for part in body.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition(":")
        if not sep:
            raise ValueError(f"{part!r} is not 'key: value'")
        out[key.strip()] = value.strip()
    return out


def _whole(value: str | None, what: str) -> int:
    if value is None:
        raise ValueError(f"no {what}")
    if not value.isdigit():
        raise ValueError(f"{what}: {value!r} is not a whole number")
    return int(value)


class _Reader:
    def __init__(self, cluster: str, ts: datetime, max_errors: int, clusters=None):
        self.cluster, self.max_errors = cluster, max_errors
        self.clusters = set(clusters) | {cluster} if clusters is not None else {cluster}
        moment = pd.Timestamp(ts)
        self.ts_ns = int((moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")).value)
        self.columns = {"cluster": [], "job_id": [], "name": [], "value": []}
        self.result = ParseResult(frame=pd.DataFrame(columns=APP_COLUMNS))
        self.target: str | None = None
        self.metadata = False
        self.job: tuple[str, int] | None = None
        self.in_entry = False
        self.entry_line = 0

    def error(self, line: int, column: str | None, message: str) -> None:
        self.result.error_count += 1
        if len(self.result.errors) < self.max_errors:
            self.result.errors.append({"line": line, "column": column, "message": message})

    def add(self, stat: str, value: float) -> None:
        name = f"{PREFIX}{self.target}/{stat}"
        if APP_NAME.fullmatch(name) is None:
            raise ValueError(f"series name {name!r} is too long or not a series name")
        self.columns["cluster"].append(self.job[0])
        self.columns["job_id"].append(self.job[1])
        self.columns["name"].append(name)
        self.columns["value"].append(float(value))

    def line(self, number: int, text: str) -> None:
        if len(text) > MAX_LINE_CHARS:
            self.error(number, None, f"the line has {len(text):,} characters, more than {MAX_LINE_CHARS:,}; skipped")
            return
        text = text.rstrip("\r\n")
        if not text.strip():
            return
        header = _HEADER.match(text)
        if header:
            target = header.group("target")
            self.in_entry, self.job = False, None
            if not _TARGET.match(target):
                self.target = None
                self.error(number, "target", f"{target!r} is not a Lustre target name (scratch-OST0003)")
                return
            self.target = target
            self.metadata = header.group("kind").lower().startswith("mdt") or bool(_MDT.search(target))
            self.result.targets.append(target)
            rest = (header.group("rest") or "").strip()
            if rest and rest != "job_stats:":
                self.error(number, "target", f"{rest!r} after '=': expected the job stats on the following lines")
            return
        if text.strip() == "job_stats:":
            return
        item = _ITEM.match(text)
        if item:
            self.in_entry, self.job, self.entry_line = True, None, number
            raw = _unquote(item.group("value"))
            if self.target is None:
                self.error(number, "job_id", "a job entry before any '<obdfilter|mdt>.<target>.job_stats=' line "
                                             "(use lctl get_param without -n, so each target is named)")
                self.in_entry = False
                return
            self.result.entries += 1
            if not raw:
                self.error(number, "job_id", "empty job_id")
                return
            ref = job_ref(raw, self.cluster, self.clusters)
            if ref is None:
                self.result.not_jobs[raw] = self.result.not_jobs.get(raw, 0) + 1
                return
            self.job = ref
            return
        timed = _TIME.match(text)
        if timed:
            if not self.in_entry:
                self.error(number, timed.group("key"), "outside a job entry ('- job_id: ...' first)")
                return
            value = timed.group("value")
            if not _NUMBER.fullmatch(value):
                self.error(number, timed.group("key"), f"{value!r} is not seconds since the epoch (1764000000 or 1764000000.123456789)")
            return
        stat = _STAT.match(text)
        if stat:
            name = stat.group("name")
            if not self.in_entry:
                self.error(number, name, "outside a job entry ('- job_id: ...' first)")
                return
            try:
                parts = _stat_fields(stat.group("body"))
                samples = _whole(parts.get("samples"), "samples")
                unit = parts.get("unit", "")
                if name in BYTE_STATS:
                    if unit and unit != "bytes":
                        raise ValueError(f"unit: {unit!r} is not bytes")
                    total = _whole(parts.get("sum"), "sum")
                elif unit and not unit.isalpha():
                    raise ValueError(f"unit: {unit!r} is not a unit (reqs, usecs, bytes)")
            except ValueError as exc:
                self.error(number, name, f"{name}: {exc}")
                return
            if self.job is None:  # not a Slurm job, or its id was refused: read, not stored
                return
            try:
                if name in BYTE_STATS:
                    self.add(name, total)
                    self.add(name.replace("_bytes", "_ops"), samples)
                elif name not in SKIPPED_STATS:
                    self.add(name, samples)
            except ValueError as exc:
                self.error(number, name, str(exc))
            return
        key = text.strip().split(":", 1)[0][:40]
        self.error(number, None, f"{key!r}: not a line of job_stats (expected '<kind>.<target>.job_stats=', "
                                 "'- job_id: ...', 'snapshot_time: ...' or '<stat>: {{ samples: ... }}')")

    def finish(self) -> ParseResult:
        n = len(self.columns["value"])
        if n:
            frame = app_frame_from_columns(np.full(n, self.ts_ns, dtype="int64"), self.columns["cluster"], self.columns["job_id"],
                                           self.columns["name"], [None] * n, self.columns["value"])
            # the same series twice in one reading (a target listed twice): the last one counts
            frame = frame.drop_duplicates(subset=["cluster", "job_id", "name"], keep="last").reset_index(drop=True)
        else:
            frame = app_frame_from_columns([], [], [], [], [], [])
        self.result.frame = frame
        self.result.rows = len(frame)
        return self.result


def parse_job_stats(lines: Iterable[str], *, cluster: str, ts: datetime, max_bytes: int | None = None,
                    max_errors: int = MAX_ERRORS, clusters=None) -> ParseResult:
    """Read ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats`` output line by line (never more than
    ``max_bytes`` characters of it: past that, one error and the rest unread), a reading taken at ``ts``, for
    ``cluster`` (the one a bare job id means; ``clusters``: the names a prefixed id may carry). Bad lines are errors naming their line; the rest is kept."""
    if not cluster:
        raise ValueError("a cluster is needed: a bare job id means a job of that cluster")
    reader = _Reader(cluster, ts, max_errors, clusters)
    seen = 0
    for number, text in enumerate(lines, start=1):
        seen += len(text)
        if max_bytes is not None and seen > max_bytes:
            reader.error(number, None, f"the text is longer than {max_bytes:,} characters; the rest was not read")
            break
        reader.line(number, text)
    return reader.finish()


def parse_text(text: str, **kwargs) -> ParseResult:
    """:func:`parse_job_stats` of a whole text, read line by line without copying it."""
    return parse_job_stats(_lines(text), **kwargs)


def _lines(text: str):
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield text[start:end]
        start = end + 1


# ---------------------------------------------------------------- rates

def split_name(name: str) -> tuple[str, str] | None:
    """(target, stat) of ``lustre/<target>/<stat>``, None for any other series."""
    if not name.startswith(PREFIX):
        return None
    target, sep, stat = name[len(PREFIX):].rpartition("/")
    return (target, stat) if sep and target else None


def kind_of(name: str) -> str | None:
    """Which total a series adds to: read_bytes, write_bytes, read_ops, write_ops, metadata_ops (an MDT's other
    operations), or None (an OST's other operations: punch, setattr, ...)."""
    parts = split_name(name)
    if parts is None:
        return None
    target, stat = parts
    if stat in ("read_bytes", "write_bytes", "read_ops", "write_ops"):
        return stat
    return "metadata_ops" if _MDT.search(target) else None


def monotone(values: np.ndarray) -> np.ndarray:
    """A cumulative counter made monotone again: where it went back (the entry expired or was cleared and
    restarted from zero), its new value is what came since the restart."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return values.copy()
    steps = np.diff(values)
    steps = np.where(steps < 0, values[1:], steps)  # a restart: all of the new value is new
    return np.concatenate([[values[0]], values[0] + np.cumsum(steps)])


def totals(frame: pd.DataFrame) -> dict[str, float]:
    """Per kind (``TOTAL_KEYS``), everything the job did as the readings say (a series' first value is what it
    did before the first reading; restarts counted)."""
    out = {key: 0.0 for key in TOTAL_KEYS}
    for name, group in frame.groupby("name", sort=False):
        kind = kind_of(str(name))
        if kind is None or group.empty:
            continue
        values = group.sort_values("ts")["value"].to_numpy(float)
        out[kind] += float(monotone(values)[-1])
    return out


def reading_step(frame: pd.DataFrame, least: int = 10, most: int = 600) -> int:
    """The finest bucket the job's readings support: the median time between two readings (whole seconds, within
    ``least`` .. ``most``); ``most`` with fewer than two readings."""
    seconds = np.unique(pd.to_datetime(frame["ts"], utc=True).dt.as_unit("ns").astype("int64").to_numpy()) / 1e9
    if len(seconds) < 2:
        return int(most)
    return int(min(max(round(float(np.median(np.diff(seconds)))), least), most))


def io_step(frame: pd.DataFrame, step: int, most: int = MAX_BUCKETS) -> int:
    """``step``, grown (:func:`apps.core.timebounds.capped_step`) so that :func:`job_io` over ``frame``'s readings
    has at most ``most`` buckets whatever their span: the step a caller must state beside the rates."""
    step = int(step)
    if step <= 0:
        raise ValueError("step must be a positive number of seconds")
    if frame is None or frame.empty:
        return step
    seconds = pd.to_datetime(frame["ts"], utc=True).dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    return int(capped_step(float(np.max(seconds) - np.min(seconds)), step, most))


def job_io(frame: pd.DataFrame, step: int, most: int = MAX_BUCKETS) -> pd.DataFrame:
    """Per epoch-aligned bucket of ``step`` seconds: ``time`` (bucket start, UTC) and the job's rates
    (``RATE_COLUMNS``) summed over targets, from its ``lustre/...`` series (other names are ignored). Each
    counter's increase between two readings is spread evenly over the time between them; the first reading of a
    series only sets its level (what came before it has no time). Empty frame when no counter moved.

    At most ``most`` buckets: over readings too far apart for ``step`` the step grows (:func:`io_step`, which a
    caller uses first to know the step it shows)."""
    step = int(step)
    if step <= 0:
        raise ValueError("step must be a positive number of seconds")
    columns = ["time", *RATE_COLUMNS]
    if frame is None or frame.empty:
        return pd.DataFrame(columns=columns)
    names = frame["name"].astype(str)
    kinds = names.map(kind_of)
    frame = frame[kinds.notna()]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = frame.assign(kind=kinds[kinds.notna()])
    seconds = pd.to_datetime(frame["ts"], utc=True).dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    lo, hi = float(np.min(seconds)), float(np.max(seconds))
    if hi <= lo:
        return pd.DataFrame(columns=columns)
    step = int(capped_step(hi - lo, step, most))
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    if last == first:
        last = first + step
    edges = np.arange(first, last + step, step, dtype=float)
    amounts = {key: np.zeros(len(edges) - 1) for key in TOTAL_KEYS}
    frame = frame.assign(_s=seconds)
    for (name, kind), group in frame.groupby(["name", "kind"], sort=False):
        if len(group) < 2:
            continue
        group = group.sort_values("_s")
        x = group["_s"].to_numpy(float)
        y = monotone(group["value"].to_numpy(float))
        x, keep = np.unique(x, return_index=True)
        y = y[keep]
        if len(x) < 2:
            continue
        at_edges = np.interp(edges, x, y, left=y[0], right=y[-1])
        amounts[kind] += np.maximum(np.diff(at_edges), 0.0)
    # the seconds of each bucket the readings cover (the first and last bucket may be partly covered)
    covered = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = {f"{key}_per_s": np.where(covered > 0, amounts[key] / np.where(covered > 0, covered, 1.0), np.nan)
                 for key in TOTAL_KEYS}
    out = pd.DataFrame({"time": pd.to_datetime(edges[:-1].astype("int64"), unit="s", utc=True), **rates})
    return out[covered > 0].reset_index(drop=True)[columns]
