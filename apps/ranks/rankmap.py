"""The rank map: a job's nodes on the dragonfly, coloured by a Megatron coordinate, by a selection,
or by what another app knows per GPU (saturation, limiter, straggler: see apps.core.gpu_colourings).
The legend counts ranks, not nodes.

Pure: must not import django.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

from apps.core.gpu_colourings import GpuColouring
from apps.topology.figures import system_figure

from .ranktable import RankTable, node_labels

DIMENSION_LABELS = {"pp": "pipeline stage", "dp": "data-parallel replica", "tp": "tensor-parallel lane",
                    "cp": "context-parallel rank", "ep": "expert-parallel rank"}
ALWAYS_OFFERED = ("pp", "dp", "tp")  # cp and ep only when the layout has more than one
SELECTED, OTHER, NOT_IN_JOB, MIXED = "selected ranks", "other ranks", "not in this job", "mixed"
UIREVISION = "rank-map"  # Plotly keeps zoom and pan across redraws with the same value


def colour_note(colour: str, colouring: GpuColouring | None = None) -> str:
    """One sentence under the map: what its colours mean."""
    if colouring is None:
        words = DIMENSION_LABELS.get(colour, colour)
        return (f"Each node is coloured by the {words} of its ranks (“{colour} mixed” when they differ); "
                "the legend counts ranks. Hover a node for its ranks.")
    if colouring.kind == "number":
        word = {"min": "lowest", "max": "highest", "mean": "mean"}[colouring.aggregate]
        scale = (f" on a fixed scale from {significant(colouring.value_range[0])} to "
                 f"{significant(colouring.value_range[1])}{colouring.unit}" if colouring.value_range else "")
        note = f"Each node shows the {word} {colouring.title} of its GPUs{scale}."
    elif colouring.priority:
        note = f"A node is “{colouring.priority[0]}” when any of its GPUs is."
    else:
        note = f"Each node shows the {colouring.title} its GPUs share, “{MIXED}” when they differ."
    return " ".join(part for part in (colouring.description, note, "Hover a node for each GPU.") if part)


def colour_options(sizes: Mapping[str, int], colourings: list[GpuColouring]) -> list[tuple[str, str]]:
    """(key, words) for the "Colour by" select: the layout's coordinates, then the GPU colourings."""
    options = [(key, words) for key, words in DIMENSION_LABELS.items() if key in ALWAYS_OFFERED or sizes.get(key, 1) > 1]
    return options + [(colouring.key, colouring.title) for colouring in colourings]


def significant(value: float, digits: int = 3) -> str:
    """``value`` with at most ``digits`` significant digits and thousands separators: 54.3, 0.123, 1,230."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    rounded = round(value, decimals)
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


@dataclass
class NodeColours:
    """One colour decision per node of the job, from per-GPU values."""

    labels: dict[str, str]  # host -> legend label (numbers: the colouring's title; no value: "no <title>")
    muted: tuple[str, ...]
    values: dict[str, float] = field(default_factory=dict)  # numbers: host -> the node's value
    gpu_words: dict[tuple[str, int], str] = field(default_factory=dict)  # (host, gpu) -> "S 54.3", for hover
    numeric: bool = False


def colour_nodes(table: RankTable, colouring: GpuColouring, gpu_values: Mapping, selected: np.ndarray | None) -> NodeColours:
    """The node colours of ``colouring`` from ``gpu_values`` ({(host, gpu): number or label}).

    Only the GPUs of ``selected`` ranks count when there is a selection; nodes without one are
    "other ranks" (muted). Numbers: the node takes ``colouring.aggregate`` of its GPUs' values.
    Labels: the first of ``colouring.priority`` any GPU has, else the label its GPUs share, else "mixed"."""
    numeric = colouring.kind == "number"
    if numeric:  # a value that is not a finite number is no value
        values = {(str(host), int(gpu)): float(value) for (host, gpu), value in gpu_values.items()
                  if _is_number(value) and math.isfinite(float(value))}
    else:
        values = {(str(host), int(gpu)): str(value) for (host, gpu), value in gpu_values.items() if value not in (None, "")}
    considered = range(table.world_size) if selected is None else (int(rank) for rank in selected)
    gpus_of: dict[str, list[int]] = {}
    for rank in considered:
        gpus_of.setdefault(table.hosts[rank], []).append(int(table.local_rank[rank]))
    missing = f"no {colouring.title}"
    labels: dict[str, str] = {host: OTHER for host in table.hosts if host not in gpus_of}
    node_values: dict[str, float] = {}
    gpu_words: dict[tuple[str, int], str] = {}
    for host, gpus in gpus_of.items():
        known = [(gpu, values[(host, gpu)]) for gpu in gpus if (host, gpu) in values]
        for gpu, value in known:
            gpu_words[(host, gpu)] = (f"{colouring.title} {significant(float(value))}{colouring.unit}" if numeric
                                      else f"{colouring.title}: {value}")
        if not known:
            labels[host] = missing
        elif numeric:
            numbers = [float(value) for _, value in known]
            node_values[host] = (min(numbers) if colouring.aggregate == "min" else max(numbers)
                                 if colouring.aggregate == "max" else sum(numbers) / len(numbers))
            labels[host] = colouring.title
        else:
            names = {str(value) for _, value in known}
            first = next((label for label in colouring.priority if label in names), None)
            labels[host] = first or (names.pop() if len(names) == 1 else MIXED)
    if numeric and not node_values:  # no node has a value: nothing to draw on a scale
        numeric = False
    muted = (OTHER, missing) + (() if numeric else (MIXED,))
    return NodeColours(labels, muted, node_values, gpu_words, numeric)


def _hover_notes(table: RankTable, show_cp: bool, gpu_words: Mapping[tuple[str, int], str], limit: int = 8) -> dict[str, str]:
    """Per node, the ranks it runs with their coordinates (GPU i = local rank i) and the GPU's value."""
    ranks_by_host: dict[str, list[int]] = {}
    for rank, host in enumerate(table.hosts):
        ranks_by_host.setdefault(host, []).append(rank)
    coords = table.coords
    notes = {}
    for host, ranks in ranks_by_host.items():
        lines = []
        for r in ranks[:limit]:
            gpu = int(table.local_rank[r])
            words = gpu_words.get((host, gpu))
            lines.append(f"GPU {gpu}: rank {r} (tp {int(coords['tp'][r])}, dp {int(coords['dp'][r])}, pp {int(coords['pp'][r])}"
                         f"{', cp ' + str(int(coords['cp'][r])) if show_cp else ''}){' · ' + words if words else ''}")
        if len(ranks) > limit:
            lines.append(f"and {len(ranks) - limit:,} more ranks")
        notes[host] = "<br>".join(lines)
    return notes


def _job_groups(table: RankTable) -> list[int]:
    rows = np.unique(table.node_row[table.node_row >= 0])
    index = table.index
    return sorted({int(index.groups[int(group)]) for group in index.node_group[rows]}) if rows.size else []


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def rank_figure(table: RankTable, *, colour: str = "pp", selected: np.ndarray | None = None, show_cp: bool = False,
                colouring: GpuColouring | None = None, gpu_values: Mapping | None = None) -> go.Figure:
    """The job's groups with its nodes coloured by ``colour`` (a coordinate: pp, dp, tp, cp, ep), or
    with a selection: the selected ranks' nodes against the rest; or, with ``colouring`` and its
    ``gpu_values``, by what another app knows per GPU (restricted to the selection when there is one).

    Each legend entry counts ranks: "pp 0 (64 ranks)", "selected ranks (8)"."""
    world = table.world_size
    chosen = None if selected is None else np.asarray(selected, dtype=np.int64)
    counted_per_host = Counter(table.hosts[int(rank)] for rank in (range(world) if chosen is None else chosen))
    node_colours = None
    if colouring is not None:
        node_colours = colour_nodes(table, colouring, gpu_values or {}, chosen)
        labels, muted = node_colours.labels, node_colours.muted
    else:
        labels, muted = node_labels(table, colour, chosen)
    figure = system_figure(table.index.topology, colour_by="label", labels=labels, groups=_job_groups(table) or None,
                           unlabelled=NOT_IN_JOB, muted_labels=muted,
                           hover_notes=_hover_notes(table, show_cp, node_colours.gpu_words if node_colours else {}),
                           label_colours=(colouring.label_colours or None) if colouring else None)
    for trace in figure.data:
        label = trace.name.rpartition(" (")[0]
        hosts = [point[0] for point in trace.customdata]
        if label == "switches":
            continue
        if label == NOT_IN_JOB:
            trace.name = f"{label} ({_plural(len(hosts), 'node', 'nodes')})"
        elif label == SELECTED:
            trace.name = f"{label} ({len(chosen):,})"
        elif label == OTHER:
            trace.name = f"{label} ({world - (0 if chosen is None else len(chosen)):,})"
        else:
            trace.name = f"{label} ({_plural(sum(counted_per_host[host] for host in hosts), 'rank', 'ranks')})"
        if node_colours is not None and node_colours.numeric and label == colouring.title:
            low, high = colouring.value_range or (min(node_colours.values.values()), max(node_colours.values.values()))
            trace.marker.update(color=[node_colours.values[host] for host in hosts], colorscale=colouring.colourscale,
                                cmin=low, cmax=high, showscale=True,
                                colorbar={"title": {"text": colouring.title + (f" ({colouring.unit.strip()})" if colouring.unit.strip() else ""),
                                                    "side": "right"}, "thickness": 12, "len": 0.8})
            word = {"min": "lowest", "max": "highest", "mean": "mean"}[colouring.aggregate]
            trace.name = f"{trace.name} · {word} GPU per node"
    figure.update_layout(uirevision=UIREVISION)
    return figure


def grid_selected(table: RankTable, selected: np.ndarray | None, replicas: int) -> list[list[int]]:
    """[stage, replica] of the stage × replica grid's cells that hold a selected rank (replica < ``replicas``)."""
    if selected is None or not len(selected):
        return []
    chosen = np.asarray(selected, dtype=np.int64)
    stages, dps = table.coords["pp"][chosen], table.coords["dp"][chosen]
    pairs = {(int(stage), int(dp)) for stage, dp in zip(stages, dps) if dp < replicas}
    return [list(pair) for pair in sorted(pairs)]
