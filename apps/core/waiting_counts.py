"""Reading the "what waits" counts (apps.core.waiting) for one staff member, as the staff page shows them.

A count that cannot be read is *unknown*, with why, never 0: a registered ``count(request)`` that returns
``None``, raises, or returns something that is not a count. One failing source does not hide the others.

Imports no framework: the entries and the request are passed in, tested on their own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class WaitingCount:
    key: str
    label: str
    count: int | None  # None: unknown, see ``why``
    why: str  # empty when the count is known
    url_name: str
    url_query: str

    @property
    def known(self) -> bool:
        return self.count is not None


def read_count(entry, request, on_error: Callable[[Any, BaseException], None] | None = None) -> WaitingCount:
    """One entry's count, or unknown with the reason."""
    why = ""
    try:
        value = entry.count(request)
    except Exception as error:  # a broken source must not take the staff page down
        if on_error is not None:
            on_error(entry, error)
        value = None
        detail = str(error).strip()
        why = f"reading it failed: {type(error).__name__}" + (f": {detail}" if detail else "")
    else:
        if value is None:
            why = "its source could not be read just now"
        elif isinstance(value, bool) or not isinstance(value, int):
            why = f"its source answered {value!r}, not a count"
            value = None
        elif value < 0:
            why = f"its source answered {value}, not a count"
            value = None
    label = entry.one if value == 1 and getattr(entry, "one", "") else entry.label
    return WaitingCount(key=entry.key, label=label, count=value, why=why,
                        url_name=entry.url_name, url_query=entry.url_query or "")


def read_counts(entries: Iterable, request, on_error=None) -> list[WaitingCount]:
    """Every entry's count, in the entries' order."""
    return [read_count(entry, request, on_error) for entry in entries]


def verdict(counts: list[WaitingCount]) -> str:
    """One line for the top of the staff page: how much waits, and what is not known."""
    if not counts:
        return "No list of waiting work is registered."
    known = [item for item in counts if item.known]
    unknown = [item for item in counts if not item.known]
    total = sum(item.count for item in known)
    if total:
        parts = [f"{item.count} {item.label}" for item in known if item.count]
        line = f"{total} waiting: " + ", ".join(parts) + "."
    elif known:
        line = "Nothing waits in the lists that answered." if unknown else "Nothing waits."
    else:
        line = ""
    if unknown:
        names = ", ".join(item.label for item in unknown)
        line = (line + " " if line else "") + f"Unknown: {names}."
    return line
