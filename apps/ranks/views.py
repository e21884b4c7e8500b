"""The ranks section of the job page: paths to a layout, and the layout drawn on the network."""
import json

import numpy as np

from apps.topology.figures import system_figure

from .ranktable import (
    DIMENSIONS,
    boundary_verdict,
    communicator_spans,
    node_labels,
    node_rank_notes,
    pipeline_boundaries,
    stage_replica_grid,
)
from .selection import SelectionError, parse_selection
from .selectors import LayoutNoLongerFits, job_ranks

DIMENSION_LABELS = {"pp": "pipeline stage", "dp": "data-parallel replica", "tp": "tensor-parallel lane",
                    "cp": "context-parallel rank", "ep": "expert-parallel rank"}
MAX_GRID_COLUMNS = 64


def ranks_context(job, params, topology, placement) -> dict:
    try:
        ranks = job_ranks(job) if job.node_list else None
    except LayoutNoLongerFits as exc:
        return {"ranks": None, "rank_dimensions": DIMENSION_LABELS, "rank_layout_problem": str(exc)}
    context = {"ranks": ranks, "rank_dimensions": DIMENSION_LABELS}
    if ranks is None:
        return context
    layout, table = ranks.layout, ranks.table
    colour = params.get("rank_colour") if params.get("rank_colour") in DIMENSIONS else "pp"
    # The API's rank filters use the same parser; a bad field is explained next to it and ignored.
    selection, selection_errors = {}, {}
    for name in ("dp", "pp", "tp"):
        try:
            selection[name] = parse_selection(params.get(f"sel_{name}", ""))
        except SelectionError as exc:
            selection[name], selection_errors[name] = None, str(exc)
    selected = table.select(**selection) if any(selection.values()) else None

    labels, muted = node_labels(table, colour, selected)
    groups = sorted({int(group) for group in (placement.nodes_per_group if placement else [])})
    figure = system_figure(topology, colour_by="label", labels=labels, groups=groups or None, unlabelled="not in this job",
                           muted_labels=muted, hover_notes=node_rank_notes(table, show_cp=layout.cp > 1))
    columns = min(layout.dp, MAX_GRID_COLUMNS)
    selected_set = set(int(rank) for rank in selected) if selected is not None else set()
    grid = stage_replica_grid(table, layout.rank_of, layout.pp, columns, selected_set)
    kinds = ("tp", "pp", "dp", "cp", "ep", "mp")
    spans = [span for span in communicator_spans(table, {kind: layout.groups_array(kind) for kind in kinds}) if span.size > 1]
    boundaries = pipeline_boundaries(table, layout.groups_array("pp"))
    context.update(
        rank_figure=json.loads(figure.to_json()),
        rank_colour=colour,
        rank_selection={name: params.get(f"sel_{name}", "") for name in ("dp", "pp", "tp")},
        rank_selection_errors=selection_errors,
        rank_gaps=table.gaps,
        rank_gaps_message=table.gaps.message(table.world_size),
        rank_selected_count=None if selected is None else int(np.size(selected)),
        rank_grid=grid,
        rank_grid_truncated=layout.dp > columns,
        rank_spans=spans,
        rank_verdict=boundary_verdict(boundaries),
        rank_inter_group=boundaries.count("inter-group"),
        rank_boundaries=len(boundaries),
    )
    return context
