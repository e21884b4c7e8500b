"""Coordinate selections such as ``6,7`` or ``0-3`` or ``1, 4-5``: one parser for the API's rank
filters (``?pp=6,7``) and the job page's selection fields (``sel_pp``).

Pure: must not import django.

Rules: comma-separated parts, each a number or an inclusive range ``low-high``; numbers are written
with the ASCII digits 0-9 only (``"²".isdigit()`` is True and ``int("²")`` fails; ``int("١")`` is 1);
spaces and empty parts are ignored; ``high`` may not be below ``low``; no value above
:data:`MAX_VALUE`. A selection names at most
:data:`MAX_VALUES` values, checked before any range is expanded, so ``0-99999999999`` costs nothing.
"""
from __future__ import annotations

import re

MAX_VALUES = 100_000  # more than any dimension of a 200,000-rank job can hold
MAX_VALUE = 999_999_999  # no coordinate comes near; bounds the digits read before int()
_PART = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")
EXAMPLE = "1 or 6,7 or 0-3"


class SelectionError(ValueError):
    """The text is not a selection; the message says which part and why, for a person to fix."""


def _number(digits: str) -> int:
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_VALUE)) or int(significant) > MAX_VALUE:
        shown = significant if len(significant) <= 20 else significant[:20] + "…"
        raise SelectionError(f"{shown} is too large: a coordinate is at most {MAX_VALUE:,}")
    return int(significant)


def parse_selection(text: str | None, *, max_values: int = MAX_VALUES) -> list[int] | None:
    """The values ``text`` names, ascending and without repeats; ``None`` when it names none
    (empty or only separators), which callers read as "no filter"."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise SelectionError(f"expected text like {EXAMPLE}, got {type(text).__name__}")
    ranges: list[tuple[int, int]] = []
    count = 0
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        match = _PART.fullmatch(part)
        if match is None:
            shown = part if len(part) <= 40 else part[:40] + "…"
            raise SelectionError(f"{shown!r} is not a number or a range like {EXAMPLE} (digits 0-9 only)")
        low, high = (_number(digits) for digits in (match.group(1), match.group(2) or match.group(1)))
        if high < low:
            raise SelectionError(f"{part!r}: the range ends before it starts; write {high}-{low}")
        count += high - low + 1
        if count > max_values:
            raise SelectionError(f"the selection names more than {max_values:,} values; it may name at most {max_values:,}")
        ranges.append((low, high))
    if not ranges:
        return None
    values: set[int] = set()
    for low, high in ranges:
        values.update(range(low, high + 1))
    return sorted(values)
