"""Turn posted sample batches (JSON, NDJSON, gzip) into the canonical table, row by row.

A batch is a JSON array of samples, ``{"samples": [...]}``, or NDJSON (one sample per line), each
``{"ts", "host", "gpu", "field", "value"}`` plus optional ``"cluster"`` and ``"uuid"``. ``field``
is a DCGM id or name (current or legacy). Every bad row is reported with its index, its line (for
NDJSON) and what is wrong; good rows are kept. Plain Python: no Django.
"""
from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pandas as pd

from . import fields as registry
from .backends.base import canonical, empty_frame

HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
MAX_GPU_INDEX = 63
MAX_REPORTED_ERRORS = 100


class BatchError(ValueError):
    """The body as a whole cannot be read (not JSON, not gzip, too large once unpacked)."""


@dataclass
class RowError:
    row: int  # 0-based index of the sample in the batch
    line: int | None  # 1-based line in an NDJSON body
    field: str | None  # which key of the sample
    message: str

    def as_dict(self) -> dict:
        return {"row": self.row, "line": self.line, "field": self.field, "message": self.message}


@dataclass
class ParsedBatch:
    frame: pd.DataFrame
    errors: list[RowError] = field(default_factory=list)
    rows: int = 0

    @property
    def rejected(self) -> int:
        return self.rows - len(self.frame)


def decompress(body: bytes, encoding: str | None, *, limit: int) -> bytes:
    """The body, gunzipped when it says so (Content-Encoding or the gzip magic), never more than
    ``limit`` bytes unpacked (a small bomb must not fill the memory)."""
    if (encoding or "").lower() in ("gzip", "x-gzip") or body[:2] == b"\x1f\x8b":
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = decompressor.decompress(body, limit + 1)
        except zlib.error as exc:
            raise BatchError(f"the body says gzip but is not: {exc}") from exc
        if len(data) > limit or decompressor.unconsumed_tail:
            raise BatchError(f"the body unpacks to more than {limit:,} bytes; send smaller batches")
        return data
    if encoding and encoding.lower() not in ("identity",):
        raise BatchError(f"Content-Encoding {encoding!r} is not supported; use gzip or none")
    return body


def split_samples(data: bytes, content_type: str | None) -> list[tuple[int | None, object]]:
    """(line, decoded sample) pairs. Undecodable NDJSON lines come back as (line, BatchError)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BatchError(f"the body is not UTF-8 (byte {exc.start})") from exc
    kind = (content_type or "").split(";")[0].strip().lower()
    stripped = text.lstrip()
    if kind in ("application/x-ndjson", "application/ndjson", "application/jsonl") or (
            kind != "application/json" and stripped and stripped[0] == "{" and "\n" in stripped.strip()):
        out = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                out.append((number, BatchError(f"line {number} is not JSON: {exc.msg} at column {exc.colno}")))
        return out
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BatchError(f"the body is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    if isinstance(document, dict) and isinstance(document.get("samples"), list):
        document = document["samples"]
    if not isinstance(document, list):
        raise BatchError('the body must be a JSON array of samples, {"samples": [...]}, or NDJSON')
    return [(None, item) for item in document]


def parse_timestamp(value) -> datetime:
    if isinstance(value, bool):
        raise ValueError("a timestamp, not a boolean")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        seconds = float(value)
        # Collectors send seconds, milliseconds, microseconds or nanoseconds since the epoch.
        for scale in (1, 1e3, 1e6, 1e9):
            if seconds / scale < 1e11:
                return datetime.fromtimestamp(seconds / scale, tz=timezone.utc)
        raise ValueError("a number too large to be a time")
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not an ISO 8601 time such as 2026-11-21T10:00:00Z") from None
        if moment.tzinfo is None:
            raise ValueError(f"{value[:40]!r} has no time zone; add Z for UTC")
        return moment.astimezone(timezone.utc)
    raise ValueError(f"a time (ISO 8601 text or seconds since the epoch), not {type(value).__name__}")


def parse_batch(samples: list[tuple[int | None, object]], *, now: datetime, default_cluster: str = "",
                max_age: timedelta = timedelta(days=400), max_ahead: timedelta = timedelta(minutes=10),
                allowed_hosts: set[str] | None = None, window: tuple[datetime, datetime] | None = None,
                cluster_override: str | None = None) -> ParsedBatch:
    """Validate each sample; keep the good ones. ``allowed_hosts``/``window`` restrict a job token to
    its own nodes and time; ``cluster_override`` pins the cluster (a job token's)."""
    errors: list[RowError] = []
    rows = {"ts": [], "cluster": [], "host": [], "gpu": [], "uuid": [], "field": [], "value": []}
    earliest, latest = now - max_age, now + max_ahead

    for index, (line, sample) in enumerate(samples):
        def bad(key, message):
            errors.append(RowError(index, line, key, message))

        if isinstance(sample, BatchError):
            bad(None, str(sample))
            continue
        if not isinstance(sample, dict):
            bad(None, f"a sample is a JSON object, not {type(sample).__name__}")
            continue
        missing = [key for key in ("ts", "host", "gpu", "field", "value") if key not in sample]
        if missing:
            bad(missing[0], f"missing {', '.join(missing)}")
            continue
        try:
            moment = parse_timestamp(sample["ts"])
        except (ValueError, OverflowError, OSError) as exc:
            bad("ts", str(exc))
            continue
        if not earliest <= moment <= latest:
            bad("ts", f"{moment:%Y-%m-%dT%H:%M:%SZ} is outside the accepted range "
                      f"{earliest:%Y-%m-%d} .. {latest:%Y-%m-%dT%H:%M}Z")
            continue
        if window is not None and not window[0] <= moment <= window[1]:
            bad("ts", f"{moment:%Y-%m-%dT%H:%M:%SZ} is outside the job's run time")
            continue
        host = sample["host"]
        if not isinstance(host, str) or not HOSTNAME.match(host):
            bad("host", "host must be a host name (letters, digits, '.', '_', '-')")
            continue
        if allowed_hosts is not None and host not in allowed_hosts:
            bad("host", f"{host} is not one of the job's nodes")
            continue
        gpu = sample["gpu"]
        if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu <= MAX_GPU_INDEX:
            bad("gpu", f"gpu must be a GPU index 0..{MAX_GPU_INDEX}")
            continue
        try:
            dcgm_field = registry.lookup(sample["field"])
        except registry.UnknownField as exc:
            bad("field", str(exc))
            continue
        value = sample["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            bad("value", f"value must be a finite number, not {json.dumps(value)[:40]}")
            continue
        cluster = cluster_override or sample.get("cluster") or default_cluster
        if not isinstance(cluster, str) or not cluster or len(cluster) > 64:
            bad("cluster", "cluster must be given (in the sample or as ?cluster=) as a name of up to 64 characters")
            continue
        uuid = sample.get("uuid") or ""
        if not isinstance(uuid, str) or len(uuid) > 80:
            bad("uuid", "uuid must be text of at most 80 characters")
            continue
        rows["ts"].append(moment)
        rows["cluster"].append(cluster)
        rows["host"].append(host)
        rows["gpu"].append(gpu)
        rows["uuid"].append(uuid)
        rows["field"].append(dcgm_field.id)
        rows["value"].append(float(value))
    frame = canonical(pd.DataFrame(rows)) if rows["ts"] else empty_frame()
    return ParsedBatch(frame, errors, len(samples))


def gzip_bytes(text: str) -> bytes:
    """For clients and tests: the gzip of ``text`` as UTF-8."""
    return gzip.compress(text.encode("utf-8"))
