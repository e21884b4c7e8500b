"""The node-colouring registry: how a higher app lets the topology page colour nodes by what it knows.

The topology app draws the machine and must not import the apps that build on it (jobs, vetting, ...).
Those register a colouring from their ``AppConfig.ready()``; the page offers each in its "Colour by"
select (``?color=<key>``), after "node state" and before its own "group" and "highlighted nodes"::

    register_node_colouring(NodeColouring(key="job", title="running job", order=10, labels=running_job_labels))

``labels(user)`` returns :class:`NodeLabels` for the user looking at the page (a colouring may show
only what that user may see): a label per hostname, what the nodes without one are called, labels
drawn in a neutral grey (``muted``) and labels with a fixed colour (``colours``).

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .registry import OrderedRegistry


@dataclass(frozen=True)
class NodeLabels:
    labels: dict[str, str]  # hostname -> label
    unlabelled: str  # what the nodes without a label are called ("no running job")
    muted: tuple[str, ...] = ()  # labels drawn in a neutral grey ("other users' jobs")
    colours: dict[str, str] | None = None  # labels that mean something get a fixed colour ("failed": red)


@dataclass(frozen=True)
class NodeColouring:
    key: str  # the page's ?color= value
    title: str  # for the "Colour by" select: "running job"
    labels: Callable[[Any], NodeLabels]  # (user) -> the nodes' labels as that user may see them
    order: int = 100  # lower first in the select


_colourings: OrderedRegistry[NodeColouring] = OrderedRegistry(key=lambda colouring: colouring.key)


def register_node_colouring(colouring: NodeColouring) -> NodeColouring:
    """Offer ``colouring`` on the topology page; the same key again replaces it."""
    return _colourings.add(colouring)


def unregister_node_colouring(key: str) -> None:
    """Remove a colouring (tests that register their own)."""
    _colourings.remove(key)


def node_colourings() -> list[NodeColouring]:
    """Every registered colouring, in select order."""
    return _colourings.entries()


def node_colouring(key: str) -> NodeColouring | None:
    return _colourings.get(key)
