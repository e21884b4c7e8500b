"""Request-body parsers with bounds, the API's defaults (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``).

DRF hands its JSON and form parsers ``request.body`` (bounded by Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE``; the API's exception handler answers Django's refusal with a 413),
but its JSON parser lets a body nested 100,000 deep raise ``RecursionError`` (a 500). These parsers:

- read at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes of a JSON or form body and answer **413** past
  it (and past a ``Content-Length`` that announces more, before reading anything), whatever stream
  they are given;
- refuse JSON nested deeper than ``API_MAX_JSON_DEPTH`` levels (default 64) with a **400**;
- answer 400 for text that is not UTF-8 or not JSON, and for numbers the standard library refuses
  (integers of more than 4,300 digits);
- turn Django's form limits (``RequestDataTooBig``, ``TooManyFieldsSent``) into the API's error
  body (413 / 400) instead of an HTML page.

A view that lists its own ``parser_classes`` should name these (``BoundedJSONParser`` in place of
``rest_framework.parsers.JSONParser``) to keep the bounds.
"""
import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import QueryDict
from rest_framework import parsers, status
from rest_framework.utils.json import strict_constant

from .exceptions import ErrorItem, InputError

DEFAULT_MAX_DEPTH = 64


def max_body_bytes() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 10 * 1024 * 1024


def max_json_depth() -> int:
    return getattr(settings, "API_MAX_JSON_DEPTH", DEFAULT_MAX_DEPTH)


def too_large(limit: int, size: int | None = None) -> InputError:
    told = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
    return InputError(f"The request body has {told}; this API accepts at most {limit:,} bytes per request.",
                      status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)


def read_bounded(stream, parser_context, limit: int) -> bytes:
    """The whole body, or a 413 as soon as it is known to exceed ``limit`` bytes."""
    request = (parser_context or {}).get("request")
    meta = getattr(request, "META", {}) if request is not None else {}
    declared = str(meta.get("CONTENT_LENGTH") or "")
    if declared.isascii() and declared.isdecimal() and int(declared) > limit:
        raise too_large(limit, int(declared))
    if stream is None:
        return b""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise too_large(limit)
    return data


def nesting_depth(value, limit: int) -> int:
    """How deep ``value`` nests (without recursion), counting stops just past ``limit``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def too_deep(limit: int) -> InputError:
    return InputError(f"JSON parse error - the body nests arrays and objects deeper than {limit} levels.",
                      [ErrorItem(message=f"nested deeper than {limit} levels")])


def loads_bounded(data: bytes, *, encoding: str = "utf-8", max_depth: int | None = None, strict: bool = True):
    """``json.loads`` for untrusted bytes: depth-limited, and only ``InputError`` (400) on bad input."""
    limit = max_json_depth() if max_depth is None else max_depth
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise InputError(f"JSON parse error - the body is not {encoding} text ({exc.__class__.__name__}).") from None
    try:
        value = json.loads(text, parse_constant=strict_constant if strict else None)
    except RecursionError:
        raise too_deep(limit) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"JSON parse error - {exc.msg} at line {exc.lineno}, column {exc.colno}.",
                         [ErrorItem(message=exc.msg, line=exc.lineno, column=exc.colno)]) from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion", NaN
        raise InputError(f"JSON parse error - {str(exc)[:200]}.") from None
    # Only a text with more brackets than the limit can nest deeper than it.
    if isinstance(value, (dict, list)) and text.count("[") + text.count("{") > limit and nesting_depth(value, limit) > limit:
        raise too_deep(limit)
    return value


class BoundedJSONParser(parsers.JSONParser):
    """DRF's JSON parser with a body-size limit (413) and a nesting-depth limit (400)."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = read_bounded(stream, parser_context, max_body_bytes())
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        return loads_bounded(data, encoding=encoding, strict=self.strict)


class BoundedFormParser(parsers.FormParser):
    """DRF's form parser (``application/x-www-form-urlencoded``) reading at most the body limit, with
    Django's field-count limit as an API error."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = read_bounded(stream, parser_context, max_body_bytes())
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return QueryDict(data, encoding=encoding)
        except TooManyFieldsSent:
            raise InputError(f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields.") from None


class BoundedMultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser with Django's limits (form fields and their non-file bytes; files are
    streamed to disk by Django's upload handlers) as API errors."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RequestDataTooBig:
            raise too_large(max_body_bytes()) from None
        except TooManyFieldsSent:
            raise InputError(f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields.") from None


class StreamParser(parsers.BaseParser):
    """Text and binary uploads (``text/plain``, ``application/octet-stream``) handed to the view as the request's
    stream, unread, so a view can parse a large log line by line in bounded memory. The view bounds what it reads
    (:class:`BoundedStream`)."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream


class BoundedStream:
    """Read at most ``limit`` bytes of ``stream`` (a 413 past it), counting what was read; iterating gives lines."""

    MAX_LINE = 1 << 20

    def __init__(self, stream, limit: int):
        self.stream, self.limit, self.read_bytes = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        if self.stream is None:
            return b""
        want = self.limit + 1 - self.read_bytes if size is None or size < 0 else min(size, self.limit + 1 - self.read_bytes)
        data = self.stream.read(max(want, 0)) if want > 0 else b""
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise too_large(self.limit)
        return data

    def lines(self, chunk: int = 1 << 16):
        """The body's lines as text (UTF-8, bad bytes replaced), one at a time."""
        pending = b""
        while True:
            data = self.read(chunk)
            if not data:
                break
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.decode("utf-8", errors="replace") + "\n"
            if len(pending) > self.MAX_LINE:  # no newline in a megabyte: hand it on in pieces, memory stays bounded
                yield pending.decode("utf-8", errors="replace")
                pending = b""
        if pending:
            yield pending.decode("utf-8", errors="replace")
