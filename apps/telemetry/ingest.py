"""Turn posted sample batches (JSON, NDJSON, gzip) into the canonical table, row by row.

A batch is a JSON array of samples, ``{"samples": [...]}``, or NDJSON (one sample per line), each
``{"ts", "host", "gpu", "field", "value"}`` plus optional ``"cluster"`` and ``"uuid"``. ``field``
is a DCGM id or name (current or legacy). A row with ``"nic"`` instead of ``"gpu"`` is a network
sample, ``{"ts", "host", "nic": "hsn2", "field": "nic_retries", "value": 123}``: ``field`` is a
canonical network field or a driver name of one (``netfields``), counters cumulative as the driver
reports them; both kinds may be mixed in one batch and go to their own tables. A row with ``"host_metrics"`` is a host
sample, ``{"ts", "host", "host_metrics": "numa0", "field": "host_cpu_busy", "value": 0.42}``: the key names
the domain (``node``, ``numaN``, ``gpuN``, ``job<id>.<step>``), ``field`` a canonical host field
(``hostfields``); host rows are kept with the network rows (the domain in ``nic``). A version is a fact, not a
sample: a row of a DCGM text field with its text, ``{"ts", "host", "gpu", "field": "DCGM_FI_DRIVER_VERSION",
"value": "560.35.03"}``, or a row ``{"ts", "host", "version": "nccl", "value": "2.21.5"}`` (a key of
``versions.KEYS``, ``"gpu"`` for a GPU's firmware, ``"partition"`` optional) goes to ``ParsedBatch.facts``.
Every bad row is reported with its index, its line (for NDJSON) and what is wrong; good rows are kept.
Plain Python: no Django.
"""
from __future__ import annotations

import codecs
import functools
import gzip
import itertools
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pandas as pd

from . import fields as registry
from . import hostfields, netfields, versions
from .backends.base import NET_COLUMNS, NET_NAME, canonical, empty_frame, empty_net_frame

HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
MAX_GPU_INDEX = 63
MAX_REPORTED_ERRORS = 100
HOST_NAMES = {name: name for name in hostfields.HOST_FIELD_NAMES}  # host fields have no other names


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
    net: pd.DataFrame = field(default_factory=empty_net_frame)  # the network samples (NET_COLUMNS)
    facts: list = field(default_factory=list)  # versions.Observation: text fields and versions, never samples

    @property
    def accepted(self) -> int:
        return len(self.frame) + len(self.net) + len(self.facts)

    @property
    def rejected(self) -> int:
        return self.rows - self.accepted


@dataclass(frozen=True)
class Scope:
    """What one caller may write: a job token's cluster, nodes and run time (None: anything). :func:`parse_batch`
    applies it sample by sample (each refused sample is that row's error); :meth:`restrict` applies the same
    rules to a table already parsed (imported text)."""

    cluster: str | None = None
    hosts: frozenset[str] | None = None
    window: tuple[datetime, datetime] | None = None
    window_words: str = ""  # the window in words, with what it is made of (``apps.core.timebounds.WriteWindow.words``)

    def cluster_for(self, given: str) -> str:
        """The cluster a sample lands in: the scope's (a job token's) over the one given."""
        return self.cluster or given

    def time_error(self, moment: datetime) -> str | None:
        if self.window is not None and not self.window[0] <= moment <= self.window[1]:
            return f"{moment:%Y-%m-%dT%H:%M:%SZ} is outside the job's write window {self._words()}"
        return None

    def host_error(self, host: str) -> str | None:
        if self.hosts is not None and host not in self.hosts:
            return f"{host} is not one of the job's nodes"
        return None

    def restrict(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
        """The canonical ``frame``'s samples inside the scope, and a message counting those dropped ("" when none)."""
        keep = pd.Series(True, index=frame.index)
        if self.hosts is not None:
            keep &= frame["host"].isin(self.hosts)
        if self.window is not None:
            keep &= frame["ts"].between(self.window[0], self.window[1])
        dropped = int((~keep).sum())
        if not dropped:
            return frame, ""
        where = f"the job's nodes or its write window {self._words()}" if self.window is not None else "the job's nodes"
        return frame[keep], f"{dropped} samples are outside {where} and were dropped"

    def _words(self) -> str:
        if self.window_words:
            return self.window_words
        return f"{self.window[0]:%Y-%m-%dT%H:%M:%SZ} – {self.window[1]:%Y-%m-%dT%H:%M:%SZ}" if self.window else ""


# Limits of the streaming reader (the portal's settings pass their own; these are the defaults).
MAX_DEPTH = 32  # a sample is an object in an array in {"samples": [...]}: depth 3
MAX_LINE_BYTES = 64 * 1024  # one NDJSON sample is ~150 bytes
MAX_KEPT_ERRORS = 1000  # per-row errors kept per batch (all are counted)
RATIO_GRACE_BYTES = 128 * 1024  # the compression ratio is judged once this much has been unpacked
INFLATE_PIECE = 64 * 1024


class BatchTooLarge(BatchError):
    """The body is (or unpacks to) more than the portal accepts in one request: a 413."""


def _is_gzip(body: bytes, encoding: str | None) -> bool:
    return (encoding or "").lower() in ("gzip", "x-gzip") or body[:2] == b"\x1f\x8b"


def inflate(body: bytes, encoding: str | None, *, limit: int, max_ratio: float | None = None,
            piece: int = INFLATE_PIECE) -> Iterator[bytes]:
    """The body in pieces of at most ``piece`` bytes, gunzipped on the fly when it says so
    (Content-Encoding or the gzip magic).

    Nothing is unpacked ahead of the reader, so memory stays at one piece whatever the body
    unpacks to. :class:`BatchTooLarge` is raised, while inflating, as soon as more than ``limit``
    bytes have come out or (after the first MiB) more than ``max_ratio`` times the compressed
    bytes read so far: a 239 KB bomb of 240 MB is refused after about 1 MB.
    """
    if not _is_gzip(body, encoding):
        if encoding and encoding.lower() not in ("identity",):
            raise BatchError(f"Content-Encoding {encoding!r} is not supported; use gzip or none")
        if len(body) > limit:
            raise BatchTooLarge(f"the body has more than {limit:,} bytes; send smaller batches")
        view = memoryview(body)
        for start in range(0, len(body), piece):
            yield bytes(view[start:start + piece])
        return
    view = memoryview(body)
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    consumed = produced = 0  # compressed bytes fed, bytes unpacked
    pending = view
    while pending:
        try:
            out = decompressor.decompress(pending, piece)
        except zlib.error as exc:
            raise BatchError(f"the body says gzip but is not: {exc}") from exc
        tail = decompressor.unconsumed_tail
        consumed += len(pending) - len(tail) - (len(decompressor.unused_data) if decompressor.eof else 0)
        produced += len(out)
        if produced > limit:
            raise BatchTooLarge(f"the body unpacks to more than {limit:,} bytes; send smaller batches")
        if max_ratio and produced > RATIO_GRACE_BYTES and produced > max_ratio * max(consumed, 1):
            raise BatchTooLarge(f"the body unpacks to more than {max_ratio:g} times its compressed size "
                                f"({consumed:,} bytes gave {produced:,}); refused as a compression bomb")
        if out:
            yield out
        if decompressor.eof:
            rest = decompressor.unused_data
            if rest.strip(b"\x00"):  # another gzip member follows (``cat a.gz b.gz``)
                decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
                pending = memoryview(rest)
                continue
            return
        pending = tail if tail else b""
        if not pending and not out:
            break
    # Input exhausted: whatever is buffered inside the decompressor comes out in bounded pieces.
    while not decompressor.eof:
        try:
            out = decompressor.decompress(decompressor.unconsumed_tail, piece)
        except zlib.error as exc:
            raise BatchError(f"the body says gzip but is not: {exc}") from exc
        if not out:
            raise BatchError("the body says gzip but ends before the gzip stream does (truncated)")
        produced += len(out)
        if produced > limit:
            raise BatchTooLarge(f"the body unpacks to more than {limit:,} bytes; send smaller batches")
        yield out


def decompress(body: bytes, encoding: str | None, *, limit: int, max_ratio: float | None = None) -> bytes:
    """The whole body, unpacked (for bodies that must be whole, e.g. imported text); see :func:`inflate`."""
    return b"".join(inflate(body, encoding, limit=limit, max_ratio=max_ratio))


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Text:
    """The body's text, decoded from its pieces as the reader asks for more: at most the value being
    read plus one piece is held. ``pos`` is the read position in ``buf``."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._bytes = 0  # bytes decoded so far (for the UTF-8 error's offset)
        self._lines = 0  # newlines in the text already dropped (for positions)
        self._dropped_to_line_start = 0
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next piece; False at the end of the body."""
        if self.eof:
            return False
        try:
            chunk = next(self._chunks)
        except StopIteration:
            chunk, self.eof = b"", True
        try:
            text = self._utf8.decode(chunk, self.eof)
        except UnicodeDecodeError as exc:
            raise BatchError(f"the body is not UTF-8 (byte {self._bytes + exc.start})") from None
        self._bytes += len(chunk)
        dropped = self.buf[:self.pos]
        self._lines += dropped.count("\n")
        newline = dropped.rfind("\n")
        self._dropped_to_line_start = (len(dropped) - newline - 1) if newline >= 0 else self._dropped_to_line_start + len(dropped)
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return bool(text) or not self.eof

    def where(self, pos: int) -> str:
        line = self._lines + self.buf.count("\n", 0, pos) + 1
        newline = self.buf.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self._dropped_to_line_start + pos + 1
        return f"line {line}, column {column}"

    def peek(self) -> str | None:
        """The next character that is not whitespace (the read position moves to it); None at the end."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None

    def value(self, *, max_bytes: int, max_depth: int, level: int, what: str):
        """The JSON value at the read position (after whitespace), read with the standard library's
        decoder; more of the body is read while the value is incomplete, up to ``max_bytes``. The value
        sits ``level`` levels deep in the document, which may nest ``max_depth`` levels in all."""
        if self.peek() is None:
            raise BatchError(f"the body is not JSON: it ends where {what} was expected")
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos <= max_bytes and self.more():
                    continue  # perhaps only cut off at the end of this piece
                cut_off = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 1
                if cut_off and not self.eof:
                    raise BatchError(f"{what} at {self.where(self.pos)} is longer than {max_bytes:,} characters; "
                                     "a sample is a small object") from None
                raise BatchError(f"the body is not JSON: {exc.msg.removesuffix(' at')} at {self.where(exc.pos)}") from None
            except RecursionError:
                raise _too_deep(max_depth) from None
            except ValueError as exc:  # e.g. an integer of more than 4,300 digits
                raise BatchError(f"the body is not JSON that can be read at {self.where(self.pos)}: {str(exc)[:120]}") from None
            if end == len(self.buf) and not self.eof and self.more():
                continue  # a number may go on in the next piece
            brackets = self.buf.count("[", self.pos, end) + self.buf.count("{", self.pos, end)
            if brackets > max_depth - level and _depth(self.buf[self.pos:end]) > max_depth - level:
                raise _too_deep(max_depth)
            self.pos = end
            return value


def _too_deep(max_depth: int) -> BatchError:
    return BatchError(f"the body nests JSON deeper than {max_depth} levels; a sample is a flat object")


def _json_document_samples(chunks: Iterable[bytes], *, max_samples: int, max_depth: int, max_item_bytes: int):
    """Samples of a JSON array or of ``{"samples": [...]}``, read one sample at a time."""
    text = _Text(chunks)
    count = 0

    def array_items(level: int):
        nonlocal count
        text.pos += 1  # the "["
        if text.peek() == "]":
            text.pos += 1
            return
        while True:
            count += 1
            if count > max_samples:
                raise BatchTooLarge(f"more than {max_samples:,} samples in one request; send smaller batches")
            yield None, text.value(max_bytes=max_item_bytes, max_depth=max_depth, level=level, what=f"sample {count}")
            following = text.peek()
            if following == "]":
                text.pos += 1
                return
            if following != ",":
                raise BatchError(f"the body is not JSON: expected ',' or ']' after sample {count} at {text.where(text.pos)}"
                                 if following else "the body is not JSON: it ends inside the array of samples")
            text.pos += 1

    first = text.peek()
    if first is None:
        raise BatchError("the body is empty; send a JSON array of samples or NDJSON")
    found = False
    if first == "[":
        yield from array_items(1)
        found = True
    elif first == "{":
        text.pos += 1
        following = text.peek()
        while following != "}":
            if following != '"':
                raise BatchError(f"the body is not JSON: expected a key at {text.where(text.pos)}" if following
                                 else "the body is not JSON: it ends inside an object")
            key = text.value(max_bytes=max_item_bytes, max_depth=max_depth, level=1, what="a key")
            if text.peek() != ":":
                raise BatchError(f"the body is not JSON: expected ':' at {text.where(text.pos)}")
            text.pos += 1
            if key == "samples" and text.peek() == "[" and not found:
                yield from array_items(2)
                found = True
            else:
                text.value(max_bytes=max_item_bytes, max_depth=max_depth, level=1, what=f"the value of {key[:40]!r}")
            following = text.peek()
            if following == ",":
                text.pos += 1
                following = text.peek()
            elif following != "}":
                raise BatchError(f"the body is not JSON: expected ',' or '}}' at {text.where(text.pos)}" if following
                                 else "the body is not JSON: it ends inside an object")
        text.pos += 1
    if not found:
        raise BatchError('the body must be a JSON array of samples, {"samples": [...]}, or NDJSON')
    if text.peek() is not None:
        raise BatchError(f"the body goes on after its JSON document at {text.where(text.pos)}; "
                         "use NDJSON for one sample per line")


def _ndjson_samples(chunks: Iterable[bytes], *, max_samples: int, max_depth: int, max_line_bytes: int):
    """(line, sample) for each non-empty line; a bad line gives (line, BatchError), a good batch goes on."""
    count = 0
    number = 0  # lines read so far
    buffer = b""  # the start of a line whose end has not arrived
    overlong = False  # skipping the rest of a line already reported as too long

    def decode(line_number: int, line: bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return BatchError(f"line {line_number} is not UTF-8 (byte {exc.start})")
        if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
            return BatchError(f"line {line_number} nests JSON deeper than {max_depth} levels")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            return BatchError(f"line {line_number} is not JSON: {exc.msg} at column {exc.colno}")
        except (ValueError, RecursionError) as exc:
            return BatchError(f"line {line_number} cannot be read: {str(exc)[:120]}")

    def complete(line: bytes, skipped: bool):
        """(line, sample) for one whole line, or None for a blank one or the end of a skipped one."""
        nonlocal count, number
        number += 1
        if skipped or not line.strip():
            return None
        count += 1
        if count > max_samples:
            raise BatchTooLarge(f"more than {max_samples:,} samples in one request; send smaller batches")
        if len(line) > max_line_bytes:
            return number, BatchError(f"line {number} is longer than {max_line_bytes:,} bytes")
        return number, decode(number, line)

    for chunk in chunks:
        parts = chunk.split(b"\n")
        for part in parts[:-1]:
            item = complete(buffer + part, overlong)
            buffer, overlong = b"", False
            if item:
                yield item
        if not overlong:
            buffer += parts[-1]
        if len(buffer) > max_line_bytes:  # a line that does not end: report it now, skip to its end
            item = complete(buffer, False)
            number -= 1  # the line goes on in the next pieces
            buffer, overlong = b"", True
            if item:
                yield item
    if buffer and not overlong:
        item = complete(buffer, False)
        if item:
            yield item


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (only called for texts with many brackets)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")


def iter_samples(chunks: Iterable[bytes], content_type: str | None, *, max_samples: int,
                 max_depth: int = MAX_DEPTH, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int | None, object]]:
    """(line, decoded sample) pairs, read from the body's pieces as they arrive (see :func:`inflate`).

    The body is a JSON array, ``{"samples": [...]}`` or NDJSON (chosen by the content type, else by
    the first line: a complete JSON object on it means NDJSON). Undecodable NDJSON lines come back
    as ``(line, BatchError)``. Raised while reading: :class:`BatchTooLarge` past ``max_samples``
    samples, :class:`BatchError` for a body that is not JSON or nests deeper than ``max_depth``.
    """
    kind = (content_type or "").split(";")[0].strip().lower()
    source = iter(chunks)
    head = b""
    for chunk in source:
        head += chunk
        stripped = head.lstrip()
        if not stripped:
            continue
        if kind in NDJSON_TYPES or kind == "application/json" or stripped[:1] != b"{":
            break
        if b"\n" in stripped.rstrip() or len(head) > max_line_bytes:
            break
    stripped = head.lstrip()
    if not stripped:
        if kind in NDJSON_TYPES:
            return
        raise BatchError("the body is empty; send a JSON array of samples or NDJSON")
    ndjson = kind in NDJSON_TYPES
    if not ndjson and kind != "application/json" and stripped[:1] == b"{":
        first_line, newline, rest = stripped.partition(b"\n")
        if newline and rest.strip() and len(first_line) <= max_line_bytes:
            try:
                ndjson = isinstance(json.loads(first_line), dict)
            except (ValueError, RecursionError):
                ndjson = False
    body = itertools.chain((head,), source)
    if ndjson:
        yield from _ndjson_samples(body, max_samples=max_samples, max_depth=max_depth, max_line_bytes=max_line_bytes)
    else:
        yield from _json_document_samples(body, max_samples=max_samples, max_depth=max_depth, max_item_bytes=max_line_bytes)


def split_samples(data: bytes, content_type: str | None, *, max_samples: int = 10**9) -> list[tuple[int | None, object]]:
    """All (line, sample) pairs of a body already in memory (tests and small tools); see :func:`iter_samples`."""
    return list(iter_samples((data,), content_type, max_samples=max_samples))


@functools.lru_cache(maxsize=4096)
def _iso_time(value: str) -> datetime:
    """An ISO 8601 time in UTC; cached: a batch repeats one time for every sample a collector took at once (a second
    of the whole machine's NIC counters is 64,512 rows with one ``ts``)."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 time such as 2026-11-21T10:00:00Z") from None
    if moment.tzinfo is None:
        raise ValueError(f"{value[:40]!r} has no time zone; add Z for UTC")
    return _within_years(moment, value)


TIME_EARLIEST, TIME_LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)


def _within_years(moment: datetime, given) -> datetime:
    """``moment`` in UTC, or a ValueError outside 2000..2200: no collector sent such a time, past 2262 (or
    before 1677) no pandas Timestamp holds it, and past 9999 in UTC not even a datetime (an OverflowError, a
    500, for a caller that catches ValueError)."""
    if not TIME_EARLIEST <= moment <= TIME_LATEST:
        shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:40] + "…"
        raise ValueError(f"{shown} is not between 2000 and 2200")
    return moment.astimezone(timezone.utc)


def parse_timestamp(value) -> datetime:
    if isinstance(value, bool):
        raise ValueError("a timestamp, not a boolean")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        seconds = float(value)
        if seconds < 0:  # datetime.fromtimestamp raises OverflowError or OSError for some: say it here
            raise ValueError(f"{value!r} is before 1970")
        # Collectors send seconds, milliseconds, microseconds or nanoseconds since the epoch.
        for scale in (1, 1e3, 1e6, 1e9):
            if seconds / scale < 1e11:
                return _within_years(datetime.fromtimestamp(seconds / scale, tz=timezone.utc), value)
        raise ValueError("a number too large to be a time")
    if isinstance(value, str):
        return _iso_time(value)
    raise ValueError(f"a time (ISO 8601 text or seconds since the epoch), not {type(value).__name__}")


def parse_batch(samples: Iterable[tuple[int | None, object]], *, now: datetime, default_cluster: str = "",
                max_age: timedelta = timedelta(days=400), max_ahead: timedelta = timedelta(minutes=10),
                scope: Scope = Scope()) -> ParsedBatch:
    """Validate each sample; keep the good ones. ``scope`` restricts a job token to its own nodes and time,
    and pins the cluster to its job's. ``samples`` may be
    a stream (:func:`iter_samples`): it is read once, and only the first ``MAX_KEPT_ERRORS`` row
    errors are kept (all are counted in ``rows``)."""
    errors: list[RowError] = []
    index = -1
    rows = {"ts": [], "cluster": [], "host": [], "gpu": [], "uuid": [], "field": [], "value": []}
    net_rows = {column: [] for column in NET_COLUMNS}
    net_names: dict = {}  # field as sent -> canonical name, or the UnknownNetField it raised
    facts: list = []
    earliest, latest = now - max_age, now + max_ahead

    for index, (line, sample) in enumerate(samples):
        def bad(key, message):
            if len(errors) < MAX_KEPT_ERRORS:
                errors.append(RowError(index, line, key, message))

        if isinstance(sample, BatchError):
            bad(None, str(sample))
            continue
        if not isinstance(sample, dict):
            bad(None, f"a sample is a JSON object, not {type(sample).__name__}")
            continue
        is_host = "host_metrics" in sample
        if is_host:  # a host field: its domain in "host_metrics" (hostfields), stored beside the NIC rows
            if "nic" in sample or "gpu" in sample or "version" in sample:
                bad("host_metrics", "a host_metrics row names its domain and has no \"gpu\", \"nic\" or \"version\"")
                continue
            sample = {**sample, "nic": sample["host_metrics"]}
        is_net = "nic" in sample
        is_version = "version" in sample
        if is_net and "gpu" in sample:
            bad("nic", "a sample names either a gpu or a nic, not both")
            continue
        if is_version and ("field" in sample or is_net):
            bad("version", "a version row names its key in \"version\" and has no \"field\" or \"nic\"")
            continue
        needed = ("ts", "host", "version", "value") if is_version else ("ts", "host", "nic" if is_net else "gpu", "field", "value")
        missing = [key for key in needed if key not in sample]
        if missing:
            bad(missing[0], f"missing {', '.join(missing)}")
            continue
        try:
            moment = parse_timestamp(sample["ts"])
        except (ValueError, OverflowError, OSError) as exc:
            bad("ts", str(exc))
            continue
        if (outside := scope.time_error(moment)) is not None:  # a job token: its job's write window, said first
            bad("ts", outside)
            continue
        if not earliest <= moment <= latest:
            bad("ts", f"{moment:%Y-%m-%dT%H:%M:%SZ} is outside the accepted range "
                      f"{earliest:%Y-%m-%d} .. {latest:%Y-%m-%dT%H:%M}Z")
            continue
        host = sample["host"]
        if not isinstance(host, str) or not HOSTNAME.match(host):
            bad("host", "host must be a host name (letters, digits, '.', '_', '-')")
            continue
        if (elsewhere := scope.host_error(host)) is not None:
            bad("host", elsewhere)
            continue
        if is_host:
            problem = hostfields.check_host_sample(sample["host_metrics"], sample["field"])
            if problem is not None:
                bad("host_metrics" if hostfields.domain_kind(sample["host_metrics"]) is None else "field", problem)
                continue
            _net_row(sample, moment, host, net_rows, HOST_NAMES, bad, scope, default_cluster)
            continue
        if is_net:
            _net_row(sample, moment, host, net_rows, net_names, bad, scope, default_cluster)
            continue
        if is_version:
            _version_row(sample, moment, host, sample.get("gpu"), sample["version"], facts, bad)
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
        if dcgm_field.kind == registry.LABEL:
            if dcgm_field.id in versions.BY_DCGM and isinstance(sample["value"], str):
                _version_row(sample, moment, host, gpu, dcgm_field.id, facts, bad)
            else:
                bad("field" if dcgm_field.id not in versions.BY_DCGM else "value",
                    f"{dcgm_field.display_name} ({dcgm_field.id}) is text (a label such as a version or a name), "
                    "not a sample: send its text as the value, it is stored as a version fact")
            continue
        value = sample["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            bad("value", f"value must be a finite number, not {_preview(value)}")
            continue
        try:
            value = float(value)  # 10**400 is an int Python holds, but no float (nor any store) does
        except OverflowError:
            bad("value", f"value {_preview(value)} is too large; a float64 goes up to about 1.8e308")
            continue
        if not math.isfinite(value):
            bad("value", f"value must be a finite number, not {value}")
            continue
        cluster = scope.cluster_for(sample.get("cluster") or default_cluster)
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
        rows["value"].append(value)
    frame = canonical(pd.DataFrame(rows)) if rows["ts"] else empty_frame()
    return ParsedBatch(frame, errors, index + 1, _net_frame(net_rows), facts)


def _version_row(sample: dict, moment: datetime, host: str, gpu, key, facts: list, bad) -> None:
    """A version reading (a DCGM text field's text, or ``"version": key``) as a fact; a bad one is the row's error."""
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu <= MAX_GPU_INDEX):
        bad("gpu", f"gpu must be a GPU index 0..{MAX_GPU_INDEX}")
        return
    partition = sample.get("partition") or ""
    if not isinstance(partition, str) or len(partition) > 64:
        bad("partition", "partition must be a Slurm partition name of up to 64 characters")
        return
    try:
        facts.append(versions.observation(host, gpu, key, sample["value"], moment, partition))
    except versions.VersionError as exc:
        bad("version" if "version" in sample else "value", str(exc))


def _finite(value, bad) -> float | None:
    """``value`` as a finite float, or None after reporting the row."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        bad("value", f"value must be a finite number, not {_preview(value)}")
        return None
    try:
        value = float(value)
    except OverflowError:
        bad("value", f"value {_preview(value)} is too large; a float64 goes up to about 1.8e308")
        return None
    if not math.isfinite(value):
        bad("value", f"value must be a finite number, not {value}")
        return None
    return value


def _net_row(sample: dict, moment: datetime, host: str, rows: dict, names: dict, bad, scope: Scope,
             default_cluster: str) -> bool:
    """Check the network part of a sample (nic, field, value, cluster) and keep it; False when refused."""
    nic = sample["nic"]
    if not isinstance(nic, str) or NET_NAME.fullmatch(nic) is None:
        bad("nic", "nic must be an interface or port name such as hsn0 or j17 (letters, digits, '_', '.', ':', "
                   "'/', '-'; at most 64)")
        return False
    given = sample["field"]
    if not isinstance(given, str):
        bad("field", f"a network field is a name such as nic_retries, not {_preview(given)}")
        return False
    name = names.get(given)
    if name is None:
        try:
            name = netfields.canonical_net_name(given)
        except netfields.UnknownNetField as exc:
            name = exc
        names[given] = name
    if isinstance(name, Exception):
        bad("field", str(name))
        return False
    value = _finite(sample["value"], bad)
    if value is None:
        return False
    cluster = scope.cluster_for(sample.get("cluster") or default_cluster)
    if not isinstance(cluster, str) or not cluster or len(cluster) > 64:
        bad("cluster", "cluster must be given (in the sample or as ?cluster=) as a name of up to 64 characters")
        return False
    rows["ts"].append(moment)
    rows["cluster"].append(cluster)
    rows["host"].append(host)
    rows["nic"].append(nic)
    rows["field"].append(name)
    rows["value"].append(value)
    return True


def _net_frame(rows: dict) -> pd.DataFrame:
    """The kept network rows as a canonical frame (already checked row by row: no second validation)."""
    if not rows["ts"]:
        return empty_net_frame()
    frame = pd.DataFrame({column: pd.Series(rows[column], dtype=object) for column in NET_COLUMNS[1:5]})
    frame.insert(0, "ts", pd.DatetimeIndex(rows["ts"]).tz_convert("UTC").as_unit("ns"))
    frame["value"] = pd.Series(rows["value"], dtype="float64")
    return frame[NET_COLUMNS]


def _preview(value) -> str:
    """A short rendering of a JSON value for a message (never the whole of a big one)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    try:
        return json.dumps(value)[:40]
    except (ValueError, RecursionError):
        return type(value).__name__


def gzip_bytes(text: str) -> bytes:
    """For clients and tests: the gzip of ``text`` as UTF-8."""
    return gzip.compress(text.encode("utf-8"))
