"""The job-list column registry: how a higher app adds a column to the job list without the jobs app importing it.

The job list (``/jobs/``) shows the jobs app's own columns; an app that builds on jobs (saturation, ...)
registers more from its ``AppConfig.ready()``::

    register_job_column(JobColumn(key="saturation", title="Saturation", load=saturation_by_job,
                                  template="saturation/_job_list_cell.html", order_by="saturation__score"))

``load(job_pks)`` answers ``{job pk: value}`` for one page of jobs at once (one query, never one per
row); jobs without a value are left out. ``template`` draws one cell with ``value`` (None when the
loader had nothing) and ``job`` in its context. ``key`` is the column's name and its value of the
``ordering`` query parameter (``?ordering=saturation``, ``-saturation``) when ``order_by`` is set:
``order_by`` is a path from the job to what it sorts by, as the ORM writes it; jobs without it sort
last either way. ``order`` places the column among the registered ones (after the jobs app's own).

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .registry import OrderedRegistry


@dataclass(frozen=True)
class JobColumn:
    key: str
    title: str
    load: Callable[[list[int]], dict[int, Any]]  # job pks -> {pk: value}
    template: str
    order_by: str | None = None  # the ORM path that sorts by this column; None: not sortable
    order: int = 50
    help: str = ""  # the header's tooltip
    css: str = ""  # the cells' class


_columns: OrderedRegistry[JobColumn] = OrderedRegistry(key=lambda column: column.key)


def register_job_column(column: JobColumn) -> None:
    """Add ``column`` to the job list; registering the same key again replaces it (reloads in tests)."""
    _columns.add(column)


def job_columns() -> list[JobColumn]:
    """The registered columns, in list order."""
    return _columns.entries()


def job_column_values(columns: Iterable[JobColumn], job_pks: list[int]) -> dict[str, dict[int, Any]]:
    """Each column's values for these jobs: one call of each loader for the whole page."""
    return {column.key: column.load(list(job_pks)) if job_pks else {} for column in columns}
