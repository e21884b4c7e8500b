"""Comparing stored rows with wanted rows: what to add, change and remove.

Plain Python (no Django): both sides are mappings from a natural key to the field values of one
row. :func:`apps.core.bulk.sync_rows` writes a :class:`RowDiff` with bulk statements; the
topology import and the Slurm job-step upsert go through it.
"""
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

EMPTY = (None, "")


@dataclass(frozen=True)
class RowChange:
    """A stored row some of whose fields differ from the wanted values."""

    key: Hashable
    pk: Any
    stored: Mapping[str, Any]  # the stored values, without the primary key
    fields: dict[str, Any]  # the fields that change, with their new values, in the wanted order

    def merged(self) -> dict[str, Any]:
        return {**self.stored, **self.fields}


@dataclass
class RowDiff:
    added: list[tuple[Hashable, Mapping[str, Any]]] = field(default_factory=list)
    changed: list[RowChange] = field(default_factory=list)
    removed: list[tuple[Hashable, Any]] = field(default_factory=list)  # (key, pk)
    unchanged: int = 0


def diff_rows(stored: Mapping[Hashable, Mapping[str, Any]], wanted: Mapping[Hashable, Mapping[str, Any]], *,
              keep_when_empty: bool = False, remove: bool = True) -> RowDiff:
    """Compare ``stored`` (key -> row values, with the primary key under ``"pk"``) with ``wanted``
    (key -> values).

    With ``keep_when_empty`` a wanted value of ``None`` or ``""`` means "not known here" and never
    replaces a stored value. Without ``remove`` stored rows that are not wanted are left alone.
    Added rows keep the order of ``wanted``; removed ones the order of ``stored``.
    """
    result = RowDiff()
    for key, values in wanted.items():
        row = stored.get(key)
        if row is None:
            result.added.append((key, values))
            continue
        fields = {name: value for name, value in values.items()
                  if row[name] != value and not (keep_when_empty and value in EMPTY)}
        if fields:
            stored_values = {name: value for name, value in row.items() if name != "pk"}
            result.changed.append(RowChange(key, row["pk"], stored_values, fields))
        else:
            result.unchanged += 1
    if remove:
        result.removed = [(key, row["pk"]) for key, row in stored.items() if key not in wanted]
    return result
