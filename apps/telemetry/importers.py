"""Importers for telemetry captured outside Belvedere's collectors: the text printed by
``dcgmi dmon`` and the Prometheus text exposition served by dcgm-exporter (``/metrics``, or a
Prometheus ``/federate`` dump of it). Both give the canonical sample table of
``apps.telemetry.backends.base``.

Contract shared by both parsers:

* every good sample is kept; every bad line or cell is reported in ``ImportResult.errors`` as
  ``{"line": n, "column": name or None, "message": text}`` (lines count from 1);
* values that are absent on purpose (``N/A``, NaN, DCGM's "blank" sentinels, metrics that are not
  DCGM fields, MIG instances) are not errors: they are counted in ``skipped`` and, where useful,
  explained in ``notes`` (same shape as errors);
* a DCGM field the registry does not know (a ``DCGM_FI_*`` metric, a dmon column tag) is kept out with
  ONE error per field, not one per line: ``{"line": <first line>, "column": <the name>, "message":
  "unknown DCGM field DCGM_FI_X: first on line 7, 12 lines with a value; its samples were left out ..."}``. Nothing is dropped without a word, and an
  unknown field in every line of a large scrape does not bury the answer;
* ``ValueError`` only for input that cannot be used as a whole (empty, not the expected format,
  a required ``start``/``ts``/``host`` missing), with a message saying what to pass;
* values are stored as printed: both tools print DCGM's own units, which are the units the
  registry stores (``fields.Field.unit``), so nothing is converted;
* DCGM's text fields (driver, NVML, VBIOS, InfoROM versions, serial: ``fields.LABEL``) are never samples: the
  exporter's labels (``DCGM_FI_DRIVER_VERSION="550.127.08"``) and dmon's text columns (``DRVER``, ``VBVER``...)
  become ``ImportResult.facts`` (``versions.Observation``), which the portal stores as version facts.

Where the layouts come from: tests/telemetry/data/importers/README.md. Plain Python and pandas,
no Django.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field as dataclass_field
from datetime import datetime

import pandas as pd

from . import fields, versions
from .backends.base import canonical, empty_frame

__all__ = ["ImportResult", "parse_dcgmi_dmon", "parse_dcgm_exporter"]


@dataclass
class ImportResult:
    """What an importer read: the canonical samples, the problems and what was left out on purpose."""

    frame: pd.DataFrame
    errors: list[dict] = dataclass_field(default_factory=list)
    skipped: int = 0  # values left out on purpose (N/A, NaN, blank sentinels, non-DCGM metrics, MIG)
    lines: int = 0  # lines of input read
    notes: list[dict] = dataclass_field(default_factory=list)  # why values were left out, where useful
    facts: list = dataclass_field(default_factory=list)  # versions.Observation: text fields read, never samples

    @property
    def samples(self) -> int:
        return len(self.frame)


# --- shared helpers ------------------------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _lines(text: str) -> list[str]:
    if not isinstance(text, str):
        raise TypeError(f"expected the output as text (str), not {type(text).__name__}; decode bytes first")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _utc(value, name: str) -> pd.Timestamp:
    """A timezone-aware UTC timestamp from a datetime, pandas Timestamp or ISO-8601 text (naive = UTC)."""
    if isinstance(value, str):
        try:
            stamp = pd.Timestamp(value.strip().replace(",", "."))
        except ValueError as exc:
            raise ValueError(f"{name}={value!r} is not an ISO-8601 time, e.g. 2026-03-02T09:15:00Z") from exc
    elif isinstance(value, (datetime, pd.Timestamp)):
        stamp = pd.Timestamp(value)
    else:
        raise TypeError(f"{name} must be a datetime or ISO-8601 text, not {type(value).__name__}")
    if pd.isna(stamp):
        raise ValueError(f"{name} is not a time")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _error(line: int | None, column: str | None, message: str) -> dict:
    return {"line": line, "column": column, "message": message}


def _unknown_field_message(what: str, first: int, count: int, unit: str, consequence: str) -> str:
    """The one message for an unknown field: what it is, where it first appears, how much of the input it had."""
    plural = unit if count == 1 else unit + "s"
    return f"unknown DCGM field {what}: first on line {first}, {count:,} {plural} with a value; {consequence}"


def _frame(rows: dict[str, list], cluster: str) -> pd.DataFrame:
    if not rows["ts"]:
        return empty_frame()
    data = dict(rows)
    data["cluster"] = [cluster] * len(rows["ts"])
    return canonical(pd.DataFrame(data))


def _new_rows() -> dict[str, list]:
    return {"ts": [], "host": [], "gpu": [], "uuid": [], "field": [], "value": []}


# --- dcgmi dmon ----------------------------------------------------------------------------------

# An ISO-8601 time some wrappers put in front of every line (``ts``-style prefixes).
_TS_PREFIX = re.compile(
    r"^[ \t]*(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}(?::?\d{2})?)?)[ \t]+")
# Entity groups dcgmi prints besides GPUs (DeviceMonitor.cpp); their rows are not per-GPU samples.
_OTHER_ENTITIES = {"vGPU", "Switch", "GPU-I", "GPU-CI", "CPU", "CPU_CORE", "Link", "UNKNOWN"}
_DMON_TRAILER = "dmon was stopped"  # "dmon was stopped do to receiving a signal" after Ctrl-C
# dcgmi's own messages: "Error setting watches. Result: -33: ...", "Error: unable to establish a
# connection to the specified host: localhost", "Unable to get GPU topology information. ... Error: -1: ..."
_DCGMI_ERROR = re.compile(r"^Error\b|\bError: ")


@dataclass
class _Header:
    line: int
    tags: list[str]
    starts: list[int]  # column of each tag in the (prefix-stripped) header line
    field_ids: list[int | None]


def parse_dcgmi_dmon(text: str, *, host: str, cluster: str = "", start=None, interval_s: float = 1.0) -> ImportResult:
    """Samples from the output of ``dcgmi dmon -e <ids> [-d <ms>]`` on ``host``.

    dmon prints a ``#Entity`` header of short field tags (again every 14 ticks), an ``ID`` units
    line, then one row per entity per tick (``GPU 0   0.512   ...``, blanks as ``N/A``). Rows have
    no time: a tick ends when an entity repeats (or at a repeated header) and tick ``k`` is given
    ``start + k * interval_s`` (pass ``interval_s`` = the ``-d`` delay in seconds; dmon sleeps that
    long between ticks, so the times are approximate). Rows that begin with an ISO-8601 time (added
    by a wrapper) keep their own time and need no ``start``. Columns are matched by tag through the
    field registry; a tag it does not know is reported once and its column skipped. Rows of MIG
    instances and other non-GPU entities are skipped (counted).
    """
    if not host or not str(host).strip():
        raise ValueError("host is required for dcgmi dmon output (dmon does not print the host name): "
                         "pass host='nid001234'")
    if not interval_s or interval_s <= 0 or not math.isfinite(interval_s):
        raise ValueError(f"interval_s must be a positive number of seconds (dmon -d in ms / 1000), not {interval_s!r}")
    lines = _lines(text)
    if not any(line.strip() for line in lines):
        raise ValueError("empty input: paste the output of `dcgmi dmon -e <field ids>`")
    start_ts = _utc(start, "start") if start is not None else None
    reader = _DmonReader(host)
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            reader.read(number, raw)
    rows = reader.finish(start_ts, interval_s)
    return ImportResult(_frame(rows, cluster), reader.errors, reader.skipped, len(lines), reader.notes, reader.observations)


def _split_time_prefix(raw: str) -> tuple[pd.Timestamp | None, str]:
    """(the line's own time, the rest) when a wrapper put an ISO-8601 time in front, else (None, line)."""
    match = _TS_PREFIX.match(raw)
    if match:
        try:
            return _utc(match.group(1), "timestamp"), raw[match.end():]
        except ValueError:
            pass
    return None, raw


def _gpu_index(text: str) -> int | None:
    try:
        index = int(text)
    except ValueError:
        return None
    return index if index >= 0 else None


class _DmonReader:
    """The state of reading dmon output line by line: the current header, the tick, the rows so far."""

    def __init__(self, host: str):
        self.host = host
        self.errors: list[dict] = []
        self.notes: list[dict] = []
        self.dcgmi_messages: list[dict] = []
        self.unknown_tags: dict[str, dict] = {}  # tag -> its one error entry (message completed in finish)
        self.unknown_rows: dict[str, int] = {}  # tag -> rows that had a cell under it
        self.header: _Header | None = None
        self.skipped = 0
        self.data_rows = 0
        self.untimed_rows = 0
        self.tick = 0
        self.seen: set[tuple[str, str]] = set()  # entities of the current tick
        self.rows = _new_rows()
        self.ticks: list[int | None] = []  # tick index per sample, None where the row had its own time
        self.facts: list[tuple] = []  # (own time or None, tick or None, gpu, version key, value) of text columns

    def read(self, number: int, raw: str) -> None:
        stamp, body = _split_time_prefix(raw)
        body = body.lstrip(" \t")
        tokens = body.split()
        first = tokens[0]
        if first == "#Entity":
            self._header_line(number, body)
        elif first == "ID" and self.header is not None:
            pass  # units line
        elif body.startswith(_DMON_TRAILER):
            self.notes.append(_error(number, None, "dmon was stopped by a signal (Ctrl-C); the output ends there"))
        elif first == "GPU" or first in _OTHER_ENTITIES:
            self._entity_row(number, body, tokens, stamp)
        elif _DCGMI_ERROR.search(body):
            entry = _error(number, None, f"dcgmi reported: {body.strip()}")
            self.errors.append(entry)
            self.dcgmi_messages.append(entry)
        else:
            self.errors.append(_error(number, None, f"not a dcgmi dmon line: {body.strip()[:80]!r}; skipped"))

    def _next_tick(self) -> None:
        self.tick += 1
        self.seen = set()

    def _header_line(self, number: int, body: str) -> None:
        """``#Entity TAG TAG ...``: the columns from here on, each matched to a registry field by its tag."""
        spans = list(re.finditer(r"\S+", body))[1:]
        tags = [span.group() for span in spans]
        field_ids = []
        for tag in tags:
            known = fields.by_dmon_tag(tag)
            field_ids.append(known.id if known else None)
            if known is None and tag not in self.unknown_tags:
                entry = _error(number, tag, "")
                self.unknown_tags[tag] = entry
                self.unknown_rows[tag] = 0
                self.errors.append(entry)
        self.header = _Header(number, tags, [span.start() for span in spans], field_ids)
        if self.seen:  # dmon repeats the header between ticks
            self._next_tick()

    def _entity_row(self, number: int, body: str, tokens: list[str], stamp: pd.Timestamp | None) -> None:
        """``GPU 0  0.512 ...`` (or another entity's row, counted and skipped): a tick ends when an entity repeats."""
        header = self.header
        if header is None:
            self.errors.append(_error(number, None, "row before any '#Entity' header line: cannot tell its columns; "
                                                    "row skipped"))
            return
        entity = (tokens[0], tokens[1] if len(tokens) > 1 else "")
        if entity in self.seen:
            self._next_tick()
        self.seen.add(entity)
        self.data_rows += 1
        if entity[0] != "GPU":
            self.skipped += sum(1 for field_id in header.field_ids if field_id is not None)
            return
        gpu = _gpu_index(entity[1])
        if gpu is None:
            name = " ".join(entity).strip()
            self.errors.append(_error(number, None, f"entity {name!r} is not 'GPU <index>': row skipped"))
            return
        cells = _dmon_cells(body, tokens, header)
        if isinstance(cells, str):
            self.errors.append(_error(number, None, cells + ": row skipped"))
            return
        for tag, field_id, cell in zip(header.tags, header.field_ids, cells):
            if field_id is None and cell not in ("", "N/A"):
                self.unknown_rows[tag] += 1
        if stamp is None:
            self.untimed_rows += 1
        for tag, field_id, cell in zip(header.tags, header.field_ids, cells):
            if field_id is not None and field_id in versions.BY_DCGM:
                self._text(number, tag, field_id, cell, gpu, stamp)
            elif field_id is not None:
                self._value(number, tag, field_id, cell, gpu, stamp)

    def _text(self, number: int, tag: str, field_id: int, cell: str, gpu: int, stamp: pd.Timestamp | None) -> None:
        """A text column (DRVER, VBVER, ...): a version fact, timed like the row, never a sample."""
        if cell in ("", "N/A"):
            self.skipped += 1
            return
        if cell.endswith("..."):
            self.notes.append(_error(number, tag, f"{tag}: {cell!r} was cut short by dcgmi (wider than its column); "
                                                  "not stored as a version"))
            return
        try:
            versions.clean_value(cell)
        except versions.VersionError as exc:
            self.errors.append(_error(number, tag, f"{tag}: {exc}; value skipped"))
            return
        self.facts.append((stamp, None if stamp is not None else self.tick, gpu, versions.BY_DCGM[field_id], cell))

    def _value(self, number: int, tag: str, field_id: int, cell: str, gpu: int, stamp: pd.Timestamp | None) -> None:
        if cell in ("", "N/A"):
            self.skipped += 1
            return
        if not _NUMBER.fullmatch(cell):
            hint = " (cut short by dcgmi: the value is wider than its column)" if cell.endswith("...") else ""
            if len(cell.split()) > 1:
                message = f"{tag}: {cell!r} does not line up with the header columns; value skipped"
            else:
                message = f"{tag}: {cell!r} is not a number{hint}; value skipped, rest of the row kept"
            self.errors.append(_error(number, tag, message))
            return
        for column, value in (("ts", stamp), ("host", self.host), ("gpu", gpu), ("uuid", ""), ("field", field_id),
                              ("value", float(cell))):
            self.rows[column].append(value)
        self.ticks.append(None if stamp is not None else self.tick)

    def finish(self, start_ts: pd.Timestamp | None, interval_s: float) -> dict[str, list]:
        """The rows with every untimed tick's time; ValueError when the output as a whole cannot be used."""
        for tag, entry in self.unknown_tags.items():
            entry["message"] = _unknown_field_message(
                f"tag {tag!r} (a dmon column)", entry["line"], self.unknown_rows[tag], "row",
                "its column was left out (not in the DCGM field registry, apps/telemetry/fields.py)")
        if self.dcgmi_messages and (self.header is None or self.data_rows == 0):
            reported = self.dcgmi_messages[0]
            raise ValueError(f"dcgmi dmon printed no data: line {reported['line']}: {reported['message']}")
        if self.header is None:
            raise ValueError("no '#Entity' header line found: this is not `dcgmi dmon` output (expected a line like "
                             "'#Entity   GRACT   SMACT ...' followed by rows like 'GPU 0   0.512 ...')")
        if start_ts is None and any(stamp is None for stamp, *_rest in self.facts):
            self.untimed_rows = self.untimed_rows or 1
        if self.untimed_rows and start_ts is None:
            raise ValueError("dcgmi dmon rows carry no time: pass start= (the UTC time of the first row, e.g. "
                             "start='2026-03-02T09:15:00Z') and interval_s= (the -d delay in seconds)")
        rows = self.rows
        if start_ts is not None:
            step = pd.Timedelta(interval_s, unit="s")
            rows["ts"] = [stamp if k is None else start_ts + k * step for stamp, k in zip(rows["ts"], self.ticks)]
        self.observations = [versions.observation(self.host, gpu, key, value,
                                                  (stamp if tick is None else start_ts + tick * pd.Timedelta(interval_s, unit="s"))
                                                  .to_pydatetime())
                             for stamp, tick, gpu, key, value in self.facts]
        return rows


def _dmon_cells(body: str, tokens: list[str], header: _Header) -> list[str] | str:
    """The value cells of a data row, one per header column, or a message saying why not.

    dmon pads every value to its column width, so a row splits on whitespace into entity type, id
    and one token per column; when it does not (a blank value, stray text), the cells are cut at the
    header's column positions instead, which the padding makes exact."""
    count = len(header.tags)
    if len(tokens) == count + 2:
        return tokens[2:]
    if not header.starts:
        return f"row has {len(tokens) - 2} values but the header has no columns"
    if len(body[:header.starts[0]].split()) != 2:
        return f"row has {len(tokens) - 2} values for {count} columns and does not line up with the header"
    for position in header.starts:
        if 0 < position < len(body) and not body[position - 1].isspace() and not body[position].isspace():
            return f"row has {len(tokens) - 2} values for {count} columns and does not line up with the header"
    bounds = header.starts + [max(len(body), header.starts[-1])]
    return [body[bounds[i]:bounds[i + 1]].strip() if bounds[i] < len(body) else "" for i in range(count)]


# --- dcgm-exporter (Prometheus text exposition format 0.0.4) ---------------------------------------

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_BLANKS = " \t"
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
# DCGM's "no value" sentinels (dcgmvalue.py): int64 >= 0x7ffffffffffffff0, doubles 2**47 + 0..3.
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANKS = {float(2 ** 47 + k) for k in range(4)}


class _ParseError(ValueError):
    pass


def _parse_sample(line: str) -> tuple[str, dict[str, str], str, str | None]:
    """(metric name, labels, value text, timestamp text or None) of one sample line, per the
    Prometheus text format: name[{label="value",...}] value [timestamp]. Raises _ParseError."""
    i, end = 0, len(line)
    while i < end and line[i] in _BLANKS:
        i += 1
    match = _METRIC_NAME.match(line, i)
    if not match:
        raise _ParseError(f"expected a metric name at column {i + 1}")
    name, i = match.group(), match.end()
    labels: dict[str, str] = {}
    if i < end and line[i] == "{":
        i += 1
        while True:
            while i < end and line[i] in _BLANKS:
                i += 1
            if i < end and line[i] == "}":
                i += 1
                break
            match = _LABEL_NAME.match(line, i)
            if not match:
                raise _ParseError(f"expected a label name or '}}' at column {i + 1}")
            label, i = match.group(), match.end()
            while i < end and line[i] in _BLANKS:
                i += 1
            if i >= end or line[i] != "=":
                raise _ParseError(f"expected '=' after label {label} at column {i + 1}")
            i += 1
            while i < end and line[i] in _BLANKS:
                i += 1
            if i >= end or line[i] != '"':
                raise _ParseError(f"expected '\"' to open the value of label {label} at column {i + 1}")
            i += 1
            chars = []
            while True:
                if i >= end:
                    raise _ParseError(f"value of label {label} is not closed with '\"'")
                char = line[i]
                if char == "\\":
                    if i + 1 >= end or line[i + 1] not in _ESCAPES:
                        raise _ParseError(f"invalid escape {line[i:i + 2]!r} in label {label} "
                                          "(only \\\\, \\\" and \\n)")
                    chars.append(_ESCAPES[line[i + 1]])
                    i += 2
                    continue
                if char == '"':
                    i += 1
                    break
                chars.append(char)
                i += 1
            if label in labels:
                raise _ParseError(f"label {label} given twice")
            labels[label] = "".join(chars)
            while i < end and line[i] in _BLANKS:
                i += 1
            if i < end and line[i] == ",":
                i += 1
                continue
            if i < end and line[i] == "}":
                i += 1
                break
            raise _ParseError(f"expected ',' or '}}' after the value of label {label} at column {i + 1}")
    if i < end and line[i] not in _BLANKS:
        raise _ParseError(f"unexpected {line[i]!r} after the metric name at column {i + 1}")
    rest = line[i:].split()
    if not rest:
        raise _ParseError("sample has no value")
    if len(rest) > 2:
        raise _ParseError(f"unexpected text after the timestamp: {' '.join(rest[2:])!r}")
    return name, labels, rest[0], rest[1] if len(rest) > 1 else None


def _sample_value(text: str) -> float:
    if "_" in text:
        raise _ParseError(f"value {text!r} is not a number")
    try:
        return float(text)
    except ValueError:
        raise _ParseError(f"value {text!r} is not a number") from None


def _is_dcgm_blank(text: str, value: float) -> bool:
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text) >= _INT64_BLANK
    return value >= float(_INT64_BLANK) or value in _FP64_BLANKS


def parse_dcgm_exporter(text: str, *, host: str | None = None, cluster: str = "", ts=None) -> ImportResult:
    """Samples from dcgm-exporter's Prometheus text exposition (a ``curl :9400/metrics`` or a
    Prometheus ``/federate`` dump of its series).

    Metric names are DCGM field names, legacy (``DCGM_FI_PROF_SM_ACTIVE``) or DCGM 4.6
    (``DCGM_FI_PROF_SM_UTIL_RATIO``), or dcgm-exporter 1.x names (``dcgm_gpu_temp``, ``dcgm_fi_prof_sm_active``:
    the 1.x exporter, and 2.x run with ``1.x-compatibility-metrics.csv``); all give the same field id. The
    1.x exporter labels the UUID ``uuid`` and has no host label (pass ``host``). Other metrics (``DCGM_EXP_*``,
    ``go_*``, fields Belvedere does not store) are skipped and counted. The host is the
    ``hostname`` label (dcgm-exporter since May 2026) or ``Hostname`` (before), else ``host``; the
    GPU is the ``gpu`` label, the UUID the ``UUID`` label. The time is the sample's timestamp (ms)
    when present, else ``ts`` (the scrape time). NaN/Inf values and DCGM's blank sentinels are
    skipped with a note; samples of MIG instances (a ``GPU_I_ID`` label) are skipped, since the
    table stores whole GPUs.
    """
    lines = _lines(text)
    if not any(line.strip() for line in lines):
        raise ValueError("empty input: paste the output of `curl -s http://<node>:9400/metrics`")
    ts_default = _utc(ts, "ts") if ts is not None else None

    errors: list[dict] = []
    notes: list[dict] = []
    skipped = 0
    samples = 0  # well-formed sample lines
    other_metrics: dict[str, int] = {}
    unknown: dict[str, dict] = {}  # unknown DCGM_FI_* name -> its one error entry
    unknown_lines: dict[str, int] = {}
    labels_only: dict[str, int] = {}  # text fields (driver version...): known, never samples
    text_labels: dict[tuple, list] = {}  # (host, gpu, label, value) -> times: the labels that are version facts
    mig = 0
    pending: list[tuple[int, str | None, int, str, int, float, pd.Timestamp | None]] = []

    for number, line in enumerate(lines, start=1):
        stripped = line.strip(_BLANKS)
        if not stripped:
            continue
        if stripped.startswith("#"):
            parts = stripped[1:].split(None, 3)
            if parts and parts[0] == "TYPE" and (len(parts) < 3 or parts[2] not in _TYPES):
                errors.append(_error(number, None, "'# TYPE' line needs a metric name and one of "
                                                   + ", ".join(sorted(_TYPES))))
            continue
        try:
            name, labels, value_text, stamp_text = _parse_sample(line)
            value = _sample_value(value_text)
            stamp = None
            if stamp_text is not None:
                if not re.fullmatch(r"-?\d+", stamp_text):
                    raise _ParseError(f"timestamp {stamp_text!r} is not an integer number of milliseconds")
                stamp = pd.Timestamp(int(stamp_text), unit="ms", tz="UTC")
        except _ParseError as exc:
            errors.append(_error(number, None, f"{exc}; line skipped"))
            continue
        samples += 1
        known = _exporter_field(name)
        if known is None:
            if name.startswith("DCGM_FI_"):
                if name not in unknown:
                    unknown[name] = _error(number, name, "")
                    unknown_lines[name] = 0
                    errors.append(unknown[name])
                unknown_lines[name] += 1
            else:
                skipped += 1
                other_metrics[name] = other_metrics.get(name, 0) + 1
            continue
        if known.kind == fields.LABEL:
            skipped += 1
            labels_only[name] = labels_only.get(name, 0) + 1
            continue
        if labels.get("GPU_I_ID", "") != "":
            skipped += 1
            mig += 1
            continue
        gpu_text = labels.get("gpu")
        if gpu_text is None or not re.fullmatch(r"\d+", gpu_text) or int(gpu_text) > 32767:
            problem = "has no gpu label" if gpu_text is None else f"has gpu={gpu_text!r}, not a GPU index"
            errors.append(_error(number, "gpu", f"{name} {problem}; line skipped"))
            continue
        if math.isnan(value) or math.isinf(value):
            skipped += 1
            notes.append(_error(number, None, f"{name} gpu {gpu_text}: value {value_text} skipped"))
            continue
        if _is_dcgm_blank(value_text, value):
            skipped += 1
            notes.append(_error(number, None, f"{name} gpu {gpu_text}: DCGM blank value {value_text} "
                                              "(no data / not supported) skipped"))
            continue
        sample_host = labels.get("hostname") or labels.get("Hostname") or host or None
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        pending.append((number, sample_host, known.id, uuid, int(gpu_text), value, stamp))
        if sample_host is not None and (stamp is not None or ts_default is not None):
            for label, label_value in labels.items():
                if label.startswith("DCGM_FI_") and label_value:
                    text_labels.setdefault((sample_host, int(gpu_text), label, label_value), []).append(
                        stamp if stamp is not None else ts_default)

    for name, entry in unknown.items():
        entry["message"] = _unknown_field_message(
            name, entry["line"], unknown_lines[name], "line",
            "its samples were left out (not in the DCGM field registry, apps/telemetry/fields.py)")
    if samples == 0 and errors:
        first = errors[0]
        raise ValueError("no Prometheus text exposition found (expected lines like "
                         "'DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-...\",Hostname=\"nid001234\"} 52'); "
                         f"line {first['line']}: {first['message']}")
    if pending and all(entry[1] is None for entry in pending):
        raise ValueError("the samples have no hostname/Hostname label: pass host= (the node the exporter ran on)")
    if pending and ts_default is None and all(entry[6] is None for entry in pending):
        raise ValueError("the samples carry no timestamps: pass ts= (the UTC time of the scrape, "
                         "e.g. ts='2026-03-02T09:15:30Z')")

    rows = _new_rows()
    for number, sample_host, field_id, uuid, gpu, value, stamp in pending:
        if sample_host is None:
            errors.append(_error(number, "hostname", "no hostname/Hostname label and no host= given; line skipped"))
            continue
        if stamp is None and ts_default is None:
            errors.append(_error(number, None, "no timestamp on the sample and no ts= given; line skipped"))
            continue
        rows["ts"].append(stamp if stamp is not None else ts_default)
        rows["host"].append(sample_host)
        rows["gpu"].append(gpu)
        rows["uuid"].append(uuid)
        rows["field"].append(field_id)
        rows["value"].append(value)

    facts = []
    for (sample_host, gpu, label, label_value), times in text_labels.items():
        for moment in sorted({min(times), max(times)}):
            facts.extend(versions.from_exporter_labels({label: label_value}, sample_host, gpu, moment.to_pydatetime()))
    facts = list(dict.fromkeys(facts))  # a node's driver label is on every GPU's lines
    if facts:
        notes.append(_error(None, None, f"{len({(f.host, f.gpu, f.key, f.value) for f in facts})} version(s) read from "
                                        "DCGM text labels, stored as facts, not samples"))
    if mig:
        notes.append(_error(None, "GPU_I_ID", f"{mig} sample(s) of MIG instances skipped: Belvedere stores whole GPUs"))
    if labels_only:
        notes.append(_error(None, None, f"{sum(labels_only.values())} sample(s) of DCGM text fields skipped (they are "
                                        "labels, not values): " + ", ".join(sorted(labels_only))))
    if other_metrics:
        notes.append(_error(None, None, f"{sum(other_metrics.values())} sample(s) of metrics that are not DCGM "
                                        "fields skipped: " + ", ".join(sorted(other_metrics))))
    errors.sort(key=lambda entry: (entry["line"] is None, entry["line"] or 0))
    return ImportResult(_frame(rows, cluster), errors, skipped, len(lines), notes, facts)


def _exporter_field(name: str) -> fields.Field | None:
    """The registry field whose current or legacy DCGM name, or dcgm-exporter 1.x metric name
    (``dcgm_gpu_temp``, go-dcgm's ``OLD_DCGM_FI``), is ``name`` (not ids or dmon tags)."""
    if not name.startswith("DCGM_FI_"):
        return fields.by_exporter_1x_name(name)
    try:
        known = fields.lookup(name)
    except fields.UnknownField:
        return None
    return known if name in known.names else None
