"""The ranks section of the job page: paths to a layout, and the layout drawn on the network."""
import json

import numpy as np

from apps.topology.figures import system_figure

from .ranktable import DIMENSIONS, boundary_verdict, communicator_spans, pipeline_boundaries
from .selectors import job_ranks

DIMENSION_LABELS = {"pp": "pipeline stage", "dp": "data-parallel replica", "tp": "tensor-parallel lane",
                    "cp": "context-parallel rank", "ep": "expert-parallel rank"}
MAX_GRID_COLUMNS = 64


def _values(text: str) -> list[int] | None:
    """'6,7' or '0-3' → numbers; None when empty or not understood (the page then selects nothing)."""
    values = []
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            values.extend(range(int(low), int(high or low) + 1))
        else:
            return None
    return values or None


def ranks_context(job, params, topology, placement) -> dict:
    ranks = job_ranks(job) if job.node_list else None
    context = {"ranks": ranks, "rank_dimensions": DIMENSION_LABELS}
    if ranks is None:
        return context
    layout, table = ranks.layout, ranks.table
    colour = params.get("rank_colour") if params.get("rank_colour") in DIMENSIONS else "pp"
    selection = {name: _values(params.get(f"sel_{name}", "")) for name in ("dp", "pp", "tp")}
    selected = table.select(**selection) if any(selection.values()) else None

    # One label per node: the colour dimension's value when all its ranks share it, else "mixed";
    # with a selection, nodes holding selected ranks stand out and the rest fade.
    labels: dict[str, str] = {}
    values_by_host: dict[str, set[int]] = {}
    dimension_values = table.coords[colour]
    for rank, host in enumerate(table.hosts):
        values_by_host.setdefault(host, set()).add(int(dimension_values[rank]))
    if selected is not None:
        chosen_hosts = {table.hosts[rank] for rank in selected}
        labels = {host: ("selected ranks" if host in chosen_hosts else "other ranks") for host in values_by_host}
        muted = ("other ranks",)
    else:
        labels = {host: f"{colour} {min(values)}" if len(values) == 1 else f"{colour} mixed" for host, values in values_by_host.items()}
        muted = (f"{colour} mixed",)
    groups = sorted({int(group) for group in (placement.nodes_per_group if placement else [])})
    # Hover: which ranks each node runs, with their coordinates (GPU i = local rank i).
    ranks_by_host: dict[str, list[int]] = {}
    for rank, host in enumerate(table.hosts):
        ranks_by_host.setdefault(host, []).append(rank)
    coords = table.coords
    notes = {
        host: "<br>".join(f"GPU {int(table.local_rank[r])}: rank {r} (tp {int(coords['tp'][r])}, dp {int(coords['dp'][r])}, "
                          f"pp {int(coords['pp'][r])}{', cp ' + str(int(coords['cp'][r])) if layout.cp > 1 else ''})"
                          for r in ranks[:8])
        for host, ranks in ranks_by_host.items()
    }
    figure = system_figure(topology, colour_by="label", labels=labels, groups=groups or None,
                           unlabelled="not in this job", muted_labels=muted, hover_notes=notes)

    # The pp × dp grid: where (tp 0, cp 0) of each stage and replica runs.
    columns = min(layout.dp, MAX_GRID_COLUMNS)
    selected_set = set(int(rank) for rank in selected) if selected is not None else set()
    grid = []
    for stage in range(layout.pp):
        row = []
        for replica in range(columns):
            rank = layout.rank_of(tp=0, cp=0, dp=replica, pp=stage)
            row.append({"rank": rank, "host": table.hosts[rank], "group": table.group_of(rank), "switch": table.switch_of(rank),
                        "selected": rank in selected_set})
        grid.append({"stage": stage, "cells": row})
    kinds = ("tp", "pp", "dp", "cp", "ep", "mp")
    spans = [span for span in communicator_spans(table, {kind: layout.groups_array(kind) for kind in kinds}) if span.size > 1]
    boundaries = pipeline_boundaries(table, layout.groups_array("pp"))
    context.update(
        rank_figure=json.loads(figure.to_json()),
        rank_colour=colour,
        rank_selection={name: params.get(f"sel_{name}", "") for name in ("dp", "pp", "tp")},
        rank_selected_count=None if selected is None else int(np.size(selected)),
        rank_grid=grid,
        rank_grid_truncated=layout.dp > columns,
        rank_spans=spans,
        rank_verdict=boundary_verdict(boundaries),
        rank_inter_group=boundaries.count("inter-group"),
        rank_boundaries=len(boundaries),
    )
    return context
