"""The link-colouring registry: how a higher app lets the topology page colour switches and global links by load.

The topology app draws the machine and must not import telemetry or the apps above it, which hold the switch
port counters. One of those registers a colouring from its ``AppConfig.ready()``; the page offers it in its
"Colour by" select (``?color=<key>``)::

    register_link_colouring(LinkColouring(key="network", title="network load", order=5, loads=network_loads))

``loads(user)`` returns :class:`LinkLoads`, or None when nothing is measured: fractions of link capacity (a
physical range, 0..1 = 0..100 % of what the links carry) per group pair and per switch, the verdict line the
page shows first, and a line on coverage (what was measured, over which window).

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .registry import OrderedRegistry


@dataclass(frozen=True)
class LinkLoads:
    pairs: dict[tuple[int, int], float]  # (group a, group b), a < b -> fraction of the pair's link capacity
    switches: dict[tuple[int, int], float]  # (group, switch index) -> fraction of its busiest fabric port
    verdict: str  # "Busiest: group 3 ↔ 7 at 83 % of its links, shared by jobs ..."
    coverage: str = ""  # "2,208 global ports measured over the last 5 min"
    notes: dict[tuple[int, int], str] = field(default_factory=dict)  # group pair -> a line for its hover


@dataclass(frozen=True)
class LinkColouring:
    key: str  # the page's ?color= value
    title: str  # for the "Colour by" select: "network load"
    loads: Callable[[Any], LinkLoads | None]  # (user) -> the loads as that user may see them
    order: int = 100  # lower first in the select


_colourings: OrderedRegistry[LinkColouring] = OrderedRegistry(key=lambda colouring: colouring.key)


def register_link_colouring(colouring: LinkColouring) -> LinkColouring:
    """Offer ``colouring`` on the topology page; the same key again replaces it."""
    return _colourings.add(colouring)


def unregister_link_colouring(key: str) -> None:
    """Remove a colouring (tests that register their own)."""
    _colourings.remove(key)


def link_colourings() -> list[LinkColouring]:
    """Every registered colouring, in select order."""
    return _colourings.entries()


def link_colouring(key: str) -> LinkColouring | None:
    return _colourings.get(key)
