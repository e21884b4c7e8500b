"""Query parameters parsed by a serializer, never by hand.

Every API view that reads ``request.query_params`` declares a plain DRF ``Serializer`` for them
and calls :func:`parse_query`::

    from rest_framework import serializers
    from apps.core.api.params import JobRefField, QueryIntegerField, parse_query

    class SeriesParams(serializers.Serializer):
        job = JobRefField(required=False)                       # "alps/123" -> JobRef("alps", 123)
        gpu = serializers.ListField(child=QueryIntegerField(min_value=0, max_value=1023), required=False)
        step = QueryIntegerField(min_value=1, max_value=86_400, required=False)

    values = parse_query(request, SeriesParams)   # a dict of validated values (missing optionals absent)
    values.get("step")                            # int or None

On bad input ``parse_query`` raises DRF's ``ValidationError``; the project's exception handler
(:mod:`apps.core.api.exceptions`) turns it into a 400 with the usual body, one item per
problem and the parameter named in ``field``::

    {"detail": "1 problem in the request: step: Ensure this value is less than or equal to 86400.",
     "errors": [{"field": "step", "line": null, "message": "Ensure this value is ..."}]}

Rules of thumb:

- Never ``str.isdigit()`` then ``int()``: ``"²".isdigit()`` is True and ``int("²")`` raises.
  Use :class:`QueryIntegerField` (ASCII digits only, always bounded) or ``serializers.IntegerField``
  with ``min_value``/``max_value``.
- Give every number a ``max_value``: an unbounded ``int`` lets ``6760759693754570375168`` reach the
  database, which answers with an overflow (a 500).
- Repeated parameters (``?gpu=0&gpu=1``) are read with ``serializers.ListField``; comma lists
  (``?fields=a,b``) with :class:`CommaListField`.
- Parameters the serializer does not declare are ignored (DRF's ``format`` and pagination's
  ``limit``/``offset`` live alongside).
- Outside a request (Dash callbacks, HTML views) use :func:`parse_params` with a plain dict or
  ``QueryDict``; it raises the same ``ValidationError`` (or return ``serializer.errors`` yourself).
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

# PostgreSQL's bigint (Django's BigIntegerField / PositiveBigIntegerField) holds at most this.
BIGINT_MAX = 2**63 - 1
_ASCII_INTEGER = re.compile(r"[+-]?[0-9]{1,1000}")


class QueryIntegerField(serializers.IntegerField):
    """An integer written with ASCII digits (``"²"``, ``"٣"``, ``"1e3"``, ``"1.0"`` are refused), bounded by
    default to a PostgreSQL bigint so a value can always reach a query without overflowing."""

    default_error_messages = {"invalid": "A whole number written with the digits 0-9 is required."}

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", -BIGINT_MAX)
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            return data
        text = str(data).strip()
        if _ASCII_INTEGER.fullmatch(text) is None:
            self.fail("invalid")
        if len(text.lstrip("+-").lstrip("0")) > 19:  # far out of range: say so without building the int
            if text.startswith("-"):
                self.fail("min_value", min_value=self.min_value)
            self.fail("max_value", max_value=self.max_value)
        return int(text)


class JobRef(NamedTuple):
    cluster: str
    job_id: int

    def __str__(self) -> str:
        return f"{self.cluster}/{self.job_id}"


@extend_schema_field({"type": "string", "pattern": r"^[^/]+/[0-9]+$", "example": "alps/1234"})
class JobRefField(serializers.Field):
    """``cluster/job_id`` (e.g. ``alps/1234``) as a :class:`JobRef`; the id is ASCII digits within a bigint."""

    default_error_messages = {
        "invalid": "Give the job as <cluster>/<job_id>, e.g. alps/1234; the job id is a whole number.",
        "range": f"The job id must be between 1 and {BIGINT_MAX}.",
    }

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        cluster, sep, job_id = data.strip().partition("/")
        if not sep or not cluster or len(cluster) > 200 or re.fullmatch(r"[0-9]+", job_id) is None:
            self.fail("invalid")
        if len(job_id) > 19 or not 1 <= int(job_id) <= BIGINT_MAX:
            self.fail("range")
        return JobRef(cluster, int(job_id))

    def to_representation(self, value):
        return str(value)


class CommaListField(serializers.ListField):
    """``?stats=mean,max`` (and repeated ``?stats=mean&stats=max``) as a list, each item validated by
    ``child``. ``max_length`` bounds how many items one request may name (default 1000)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 1000)
        super().__init__(**kwargs)

    def get_value(self, dictionary):
        if isinstance(dictionary, QueryDict):
            if self.field_name not in dictionary:
                return serializers.empty
            raw = dictionary.getlist(self.field_name)
        else:
            raw = dictionary.get(self.field_name, serializers.empty)
            if raw is serializers.empty:
                return raw
            raw = raw if isinstance(raw, (list, tuple)) else [raw]
        items: list[Any] = []
        for value in raw:
            if isinstance(value, str):
                items.extend(part.strip() for part in value.split(",") if part.strip())
            else:
                items.append(value)
        return items


def parse_params(data, serializer_class: type[serializers.Serializer], *, context: dict | None = None) -> dict:
    """Validate ``data`` (a ``QueryDict`` or a plain dict) with ``serializer_class``; return its
    ``validated_data`` or raise DRF's ``ValidationError`` (400, parameters named)."""
    serializer = serializer_class(data=data, context=context or {})
    if not serializer.is_valid():
        raise serializers.ValidationError({name: _messages(detail) for name, detail in serializer.errors.items()})
    return dict(serializer.validated_data)


def _messages(detail) -> list:
    """A parameter's errors as a flat list: ``?gpu=0&gpu=x`` names ``gpu`` ("value 2: ..."), not ``gpu.1``."""
    if isinstance(detail, dict):
        return [f"value {index + 1}: {message}" if isinstance(index, int) else message
                for index, messages in detail.items() for message in _messages(messages)]
    if isinstance(detail, (list, tuple)):
        return [message for item in detail for message in _messages(item)]
    return [detail]


def parse_query(request, serializer_class: type[serializers.Serializer], *, context: dict | None = None) -> dict:
    """Validate ``request.query_params`` with ``serializer_class``; return ``validated_data``.

    Raises ``rest_framework.exceptions.ValidationError`` → a 400 whose ``errors`` name each bad
    parameter (see the module docstring for an example serializer)."""
    params = getattr(request, "query_params", None)
    if params is None:  # a plain Django HttpRequest
        params = request.GET
    return parse_params(params, serializer_class, context={"request": request, **(context or {})})
