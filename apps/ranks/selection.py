"""Coordinate selections such as ``6,7`` or ``0-3`` or ``1, 4-5``: one parser for the API's rank
filters (``?pp=6,7``) and the job page's selection fields (``sel_pp``).

Pure: must not import django.

Rules: comma-separated parts, each a number or an inclusive range ``low-high`` (``low–high`` with the
en dash the page itself writes is read the same); numbers are written
with the ASCII digits 0-9 only (``"²".isdigit()`` is True and ``int("²")`` fails; ``int("١")`` is 1);
spaces and empty parts are ignored; ``high`` may not be below ``low``; no value above
:data:`MAX_VALUE`. A selection names at most
:data:`MAX_VALUES` values, checked before any range is expanded, so ``0-99999999999`` costs nothing.

:func:`parse_bounded` adds the check against the job's layout: a value the layout does not have is
an error that names the range ("stage 8 does not exist: stages 0–7"), never a part that silently
selects nothing. :func:`read_selections` reads the job page's (or the figure endpoint's) fields.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

MAX_VALUES = 100_000  # more than any dimension of a 200,000-rank job can hold
MAX_VALUE = 999_999_999  # no coordinate comes near; bounds the digits read before int()
_PART = re.compile(r"([0-9]+)(?:\s*[-\u2013]\s*([0-9]+))?")
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


# How a person names one value of each dimension, and several: "stage 8", "stages 0–7".
DIMENSION_WORDS = {
    "pp": ("stage", "stages"),
    "dp": ("replica", "replicas"),
    "tp": ("lane", "lanes"),
    "cp": ("context-parallel rank", "context-parallel ranks"),
    "ep": ("expert-parallel rank", "expert-parallel ranks"),
}


def _spans(values: list[int]) -> list[tuple[int, int]]:
    """Sorted values as runs of consecutive numbers."""
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _written(runs: list[tuple[int, int]], shown: int = 4) -> str:
    parts = [f"{low:,}" if low == high else f"{low:,}–{high:,}" for low, high in runs[:shown]]
    if len(runs) > shown:
        return ", ".join(parts) + f" and {len(runs) - shown:,} more"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def out_of_range(values: list[int], size: int, dimension: str) -> str | None:
    """The sentence for the values of ``values`` (sorted) that ``dimension`` of size ``size`` lacks;
    None when it has them all. "stage 8 does not exist: stages 0–7"."""
    missing = [value for value in values if value >= size]
    if not missing:
        return None
    one, many = DIMENSION_WORDS.get(dimension, (dimension, dimension))
    runs = _spans(missing)
    single = len(missing) == 1
    subject = f"{one if single else many} {_written(runs)} {'does' if single else 'do'} not exist"
    if size == 1:
        return f"{subject}: there is only {one} 0"
    return f"{subject}: {many} 0–{size - 1:,}"


def parse_bounded(text: str | None, dimension: str, size: int, *, max_values: int = MAX_VALUES) -> list[int] | None:
    """:func:`parse_selection`, then every value checked against the ``size`` values (0 … size-1)
    ``dimension`` has in the job's layout; :class:`SelectionError` names the range otherwise."""
    values = parse_selection(text, max_values=max_values)
    if values is not None:
        problem = out_of_range(values, size, dimension)
        if problem:
            raise SelectionError(problem)
    return values


def read_selections(fields: Mapping[str, str | None], sizes: Mapping[str, int]) -> tuple[dict[str, list[int] | None], dict[str, str]]:
    """Each dimension of ``sizes`` whose text ``fields`` holds, parsed and bounds-checked.

    Returns (selection, errors): a dimension with a problem is ``None`` in the selection (no filter)
    and its sentence is in ``errors``, so a caller can draw the rest and say what it ignored."""
    selection: dict[str, list[int] | None] = {}
    errors: dict[str, str] = {}
    for dimension, size in sizes.items():
        try:
            selection[dimension] = parse_bounded(fields.get(dimension), dimension, size)
        except SelectionError as exc:
            selection[dimension], errors[dimension] = None, str(exc)
    return selection, errors
