"""Sections that higher apps add to a job's PDF report (apps.appmetrics' report), without appmetrics importing them.

A higher app registers from its ``AppConfig.ready()``::

    register_report_section("campaign", campaign_report_section)

``fn(job)`` returns the section as plain data, or None when it has nothing to say about the job::

    {"title": "Campaign apertus-70b", "lines": ["Goodput 81 % of 12,345 GPU-hours", ...],
     "pairs": [("Allocations", "14"), ...], "table": {"headers": [...], "rows": [[...], ...]}}

The report draws each section on a page of its own after its details, in key order. Plain Python: no Django.
"""
from __future__ import annotations

from typing import Any, Callable

from .registry import OrderedRegistry

_sections: OrderedRegistry = OrderedRegistry(key=lambda entry: entry[0], sort_key=lambda entry: (entry[2], entry[0]))


def register_report_section(key: str, fn: Callable[[Any], dict | None], order: int = 50) -> None:
    """Add a section to every job report; the same key again replaces it."""
    _sections.add((key, fn, order))


def report_sections() -> list[tuple[str, Callable[[Any], dict | None]]]:
    return [(key, fn) for key, fn, _ in _sections.entries()]
