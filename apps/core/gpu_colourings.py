"""The GPU-colouring registry: how a higher app lets the rank map colour GPUs by what it knows.

The ranks app draws a job's GPUs on the network and must not import the apps that build on it
(saturation, vetting, ...). Those register a colouring from their ``AppConfig.ready()``::

    register_gpu_colouring("saturation", "Saturation S", s_per_gpu, value_range=(0, 100), aggregate="min")

``fn(job)`` returns ``{(host, gpu): value}`` (``gpu`` = the GPU index on the node = local rank) or
``None`` when the job has nothing to show (not scored yet). ``kind`` says what the values are:
``"number"`` (drawn on a continuous scale, ``value_range`` fixing its ends) or ``"label"`` (one
colour per label, ``label_colours`` fixing some). The rank map
draws one marker per node, so the options say how a node's GPUs make the node's colour:
``aggregate`` for numbers ("min": the worst GPU shows, for a score), ``priority`` for labels (the
first of these labels any GPU of the node has names the node: "straggler" over "keeps pace";
without one, a node whose GPUs disagree is "mixed").

``available(job)`` (optional) answers cheaply whether ``fn`` would give values, so a page can
offer the colouring without computing it; without it, ``fn(job) is not None`` is used.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from .registry import OrderedRegistry

AGGREGATES = ("min", "max", "mean")
KINDS = ("number", "label")
logger = logging.getLogger(__name__)

GpuValues = dict[tuple[str, int], Any]


@dataclass(frozen=True)
class GpuColouring:
    key: str
    title: str  # for the "Colour by" select and the legend: "Saturation S"
    fn: Callable[[Any], GpuValues | None]
    kind: str = "label"  # "number" or "label"
    available: Callable[[Any], bool] | None = None
    order: int = 100  # lower first in the select
    aggregate: str = "min"  # numbers: how a node's GPUs make the node's value
    value_range: tuple[float, float] | None = None  # numbers: fixed ends of the colour scale
    unit: str = ""  # numbers: written after the value ("%", " °C"); empty for a bare score
    colourscale: str = "Viridis"  # numbers: a Plotly colour scale name
    priority: tuple[str, ...] = ()  # labels: the first one a node's GPUs have names the node
    label_colours: dict[str, str] = field(default_factory=dict)  # labels: fixed colours ("straggler": red)
    description: str = ""  # one sentence under the map: what the colour means

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate {self.aggregate!r} is not one of {', '.join(AGGREGATES)}")
        if self.value_range is not None and not self.value_range[0] < self.value_range[1]:
            raise ValueError(f"value_range {self.value_range!r} must go from low to high")

    def is_available(self, job) -> bool:
        if self.available is not None:
            return bool(self.available(job))
        return self.fn(job) is not None


_colourings: OrderedRegistry[GpuColouring] = OrderedRegistry(key=lambda colouring: colouring.key)


def register_gpu_colouring(key: str, title: str, fn: Callable[[Any], GpuValues | None], **options) -> GpuColouring:
    """Offer ``fn`` as a colouring of a job's GPUs under ``key``; the same key again replaces it."""
    colouring = GpuColouring(key=key, title=title, fn=fn, **options)
    return _colourings.add(colouring)


def unregister_gpu_colouring(key: str) -> None:
    """Remove a colouring (tests that register their own)."""
    _colourings.remove(key)


def gpu_colourings() -> list[GpuColouring]:
    """Every registered colouring, in select order."""
    return _colourings.entries()


def gpu_colouring(key: str) -> GpuColouring | None:
    return _colourings.get(key)


def available_gpu_colourings(job) -> list[GpuColouring]:
    """The registered colourings that have something to show for ``job``. A colouring whose check
    fails is left out rather than breaking the page that asked."""
    found = []
    for colouring in gpu_colourings():
        try:
            if colouring.is_available(job):
                found.append(colouring)
        except Exception:  # noqa: BLE001 - another app's problem must not take the rank map down
            logger.exception("GPU colouring %r failed its availability check", colouring.key)
    return found
