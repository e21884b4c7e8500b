"""The "what waits" registry: counts of work that waits for staff (approvals, triage items, incidents),
shown at the top of the staff page, each linking to its list.

An app that keeps such a list registers its count from its ``AppConfig.ready()``::

    register_waiting(Waiting(key="approvals", label="namespace requests to approve", order=10,
                             url_name="namespaces:list", count=lambda request: ...))

``count(request)`` returns how many wait for that staff member (``None`` when the source cannot be read:
the page says so instead of showing 0); ``url_name`` (with ``url_query``) is where the list lies.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .registry import OrderedRegistry


@dataclass(frozen=True)
class Waiting:
    key: str
    label: str  # plural noun phrase: "namespace requests to approve"
    order: int
    url_name: str
    count: Callable[[Any], int | None]  # (request) -> how many wait, or None when unknown
    url_query: str = ""  # appended to the list's URL, e.g. "?state=open"
    one: str = ""  # the label for a count of 1: "namespace request to approve" (empty: ``label`` for every count)


_waiting: OrderedRegistry[Waiting] = OrderedRegistry(key=lambda entry: entry.key)


def register_waiting(entry: Waiting) -> Waiting:
    """Add ``entry``; the same key again replaces it."""
    return _waiting.add(entry)


def unregister_waiting(key: str) -> None:
    _waiting.remove(key)


def waiting_entries() -> list[Waiting]:
    """The registered counts, in page order."""
    return _waiting.entries()
