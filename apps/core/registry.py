"""The one shape of a registry: entries added by key from a higher app's ``AppConfig.ready()``, read
back in a stable order by the lower app that asks.

Each registry module of apps/core (panels, job columns, GPU and node colourings, page sections,
refreshers) keeps its own entry type and public functions and stores its entries in one
:class:`OrderedRegistry`: registering the same key again replaces the entry (modules reload in tests),
and entries come back sorted by ``(order, key)``.

Plain Python: no Django import.
"""
from __future__ import annotations

from typing import Callable, Generic, Hashable, Iterator, TypeVar

Entry = TypeVar("Entry")


class OrderedRegistry(Generic[Entry]):
    """Entries by key; ``entries()`` sorted by ``sort_key`` (default: the entry's ``order``, then its key)."""

    def __init__(self, key: Callable[[Entry], Hashable], sort_key: Callable[[Entry], tuple] | None = None):
        self._key = key
        self._sort_key = sort_key or (lambda entry: (getattr(entry, "order", 0), str(key(entry))))
        self._entries: dict[Hashable, Entry] = {}

    def add(self, entry: Entry) -> Entry:
        """Register ``entry``; an entry with the same key is replaced."""
        self._entries[self._key(entry)] = entry
        return entry

    def remove(self, key: Hashable) -> None:
        """Forget the entry under ``key``, if any (tests that register their own)."""
        self._entries.pop(key, None)

    def get(self, key: Hashable) -> Entry | None:
        return self._entries.get(key)

    def clear(self) -> None:
        self._entries.clear()

    def snapshot(self) -> dict:
        """A copy of the entries by key, for :meth:`restore` (tests that register their own)."""
        return dict(self._entries)

    def restore(self, snapshot: dict) -> None:
        self._entries = dict(snapshot)

    def entries(self, where: Callable[[Entry], bool] | None = None) -> list[Entry]:
        """The entries (those ``where`` accepts), in order."""
        chosen = self._entries.values() if where is None else filter(where, self._entries.values())
        return sorted(chosen, key=self._sort_key)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self._entries)
