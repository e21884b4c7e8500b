"""The ranks panel of the job page (registered in apps.ranks.apps): its shell, its first-screen
summary, and the rank map's JSON for ``GET /api/v1/jobs/<cluster>/<job_id>/ranks/figure/``.

The shell (``context``) holds the layout, the selection form with its messages, the stage × replica
grid and the communicators table; the figure is not built here: the page loads it from the endpoint
named in ``rank_figure_url`` (static/js/ranks.js), and redraws it there when the colour or the
selection changes.
"""
from __future__ import annotations

import hashlib
import json
from typing import Callable
from urllib.parse import urlencode

import numpy as np
from django.core.cache import cache
from django.urls import reverse

from apps.core.gpu_colourings import available_gpu_colourings, gpu_colouring
from apps.core.panels import Finding, PanelSummary
from apps.topology.selectors import topology_revision_latest

from .findings import LINK, SOURCE, layout_words, ranks_summary
from .rankmap import DIMENSION_LABELS, colour_note, colour_options, grid_selected, rank_figure
from .ranktable import SPAN_KINDS, analyse_layout, boundary_verdict, stage_replica_grid
from .selection import read_selections
from .selectors import JobRanks, LayoutNoLongerFits, global_link_loads, job_layout_get, job_ranks
from .verdicts import crosses_groups, layout_verdicts

SELECTION_FIELDS = ("dp", "pp", "tp")  # the page's fields sel_dp, sel_pp, sel_tp
PANEL_SPAN_KINDS = tuple(kind for kind in SPAN_KINDS if kind != "dp-cp")  # the page leaves out the combined one
MAX_GRID_COLUMNS = 64
DEFAULT_COLOUR = "pp"


class ColourUnavailable(ValueError):
    """The asked colouring does not exist or has nothing for this job; the message lists the choices."""


def _analysis(job) -> dict | None:
    """The job's ranks with their communicator spans and pipeline boundaries, computed once per job
    object (the page asks for the summary and the shell of the same job)."""
    cached = getattr(job, "_ranks_panel_analysis", None)
    if cached is not None:
        return cached["value"]
    ranks = job_ranks(job) if job.node_list else None  # LayoutNoLongerFits propagates, not cached
    value = None
    if ranks is not None:
        analysis = analyse_layout(ranks.layout, ranks.table, PANEL_SPAN_KINDS)
        # The table has a row for every kind, an unused one (size 1) saying so; the findings look at the used ones.
        value = {"ranks": ranks, "spans": [span for span in analysis.spans if span.size > 1],
                 "all_spans": analysis.spans, "boundaries": analysis.boundaries}
    job._ranks_panel_analysis = {"value": value}
    return value


def selection_sizes(ranks: JobRanks) -> dict[str, int]:
    return {name: ranks.layout.sizes_by_name[name] for name in SELECTION_FIELDS}


def span_row(span, verdict=None) -> dict:
    """A communicators table row: counts with thousands separators; the network columns empty ("–")
    when every group stays inside a node; the kind's verdict (level and sentence, as the layout API
    gives them) when known."""
    numbers = {name: f"{getattr(span, name):,}" for name in
               ("groups", "size", "inside_node", "network_groups", "max_nodes", "max_switches", "max_dragonfly_groups",
                "spanning_groups")}
    return {"kind": span.kind, "words": span.words, "network": bool(span.network_groups), "used": span.size > 1,
            "level": verdict.level if verdict else None, "verdict": verdict.words if verdict else None, **numbers}


def span_verdicts(job, ranks: JobRanks, spans, user) -> dict:
    """Per kind of ``spans``: how it is likely to perform (apps.ranks.verdicts), with the measured load of
    the global links while the job runs and only when a communicator leaves its dragonfly group."""
    loads = global_link_loads(job, user) if crosses_groups(spans) else None
    return layout_verdicts(ranks.layout, ranks.table, spans, loads)


def shell(job, params, user=None) -> dict:
    """The template context of templates/ranks/_job_section.html for ``job`` and the page's GET
    ``params`` (rank_colour, sel_dp, sel_pp, sel_tp); ``user`` reads the network load for the verdicts."""
    try:
        analysis = _analysis(job)
    except LayoutNoLongerFits as exc:
        return {"job": job, "ranks": None, "rank_layout_problem": str(exc)}
    if analysis is None:
        return {"job": job, "ranks": None}
    ranks = analysis["ranks"]
    layout, table = ranks.layout, ranks.table
    options = colour_options(layout.sizes_by_name, available_gpu_colourings(job))
    keys = [key for key, _ in options]
    asked = params.get("rank_colour") or DEFAULT_COLOUR
    colour = asked if asked in keys else DEFAULT_COLOUR
    fields = {name: params.get(f"sel_{name}", "") or "" for name in SELECTION_FIELDS}
    selection, errors = read_selections(fields, selection_sizes(ranks))
    selected = table.select(**selection) if any(selection.values()) else None
    columns = min(layout.dp, MAX_GRID_COLUMNS)
    query = {"colour": colour, **{f"sel_{name}": text for name, text in fields.items() if text}}
    count = None if selected is None else int(np.size(selected))
    verdicts = span_verdicts(job, ranks, analysis["all_spans"], user)
    return {
        "job": job,
        "ranks": ranks,
        "rank_colour_options": options,
        "rank_colour": colour,
        "rank_colour_refused": None if asked == colour else asked,
        "rank_colour_note": _note_for(colour),
        "rank_figure_url": reverse("ranks-api:ranks-figure", args=[job.cluster.name, job.job_id]) + "?" + urlencode(query),
        "rank_selection": fields,
        "rank_selection_errors": errors,
        "rank_selected_count": count,
        "rank_selected_count_words": "" if count is None else f"{count:,} rank{'' if count == 1 else 's'}",
        "rank_layout_words": layout_words(layout),
        "rank_world_words": f"{layout.world_size:,} ranks",
        "rank_last": {name: size - 1 for name, size in selection_sizes(ranks).items()},
        "rank_gaps": table.gaps,
        "rank_gaps_message": table.gaps.message(table.world_size),
        "rank_grid": stage_replica_grid(table, layout.rank_of, layout.pp, columns,
                                        set() if selected is None else {int(rank) for rank in selected}),
        "rank_grid_truncated": layout.dp > columns,
        "rank_grid_columns": columns,
        "rank_spans": analysis["spans"],
        "rank_span_rows": [span_row(span, verdicts.get(span.kind)) for span in analysis["all_spans"]],
        "rank_verdict": boundary_verdict(analysis["boundaries"]),
        "rank_inter_group": analysis["boundaries"].count("inter-group"),
        "rank_boundaries": len(analysis["boundaries"]),
    }


def _note_for(colour: str) -> str:
    return colour_note(colour, gpu_colouring(colour) if colour not in DIMENSION_LABELS else None)


def context(job, request) -> dict:
    """The panel's template context (JobPanel.context): cheap, no figure. ``rank_panel`` tells the
    template that the page provides the section around it."""
    return {**shell(job, request.GET, request.user), "rank_panel": True}


SUMMARY_SECONDS = 3600


def summary(job) -> PanelSummary | None:
    """The layout as a fact and where its communicators cross the network (JobPanel.summary); None
    while the job has no layout. The first screen asks on every view and live update, so the answer
    is cached under what it depends on (the layout row, the node list, the topology revision): two
    small queries when nothing changed."""
    stored = job_layout_get(job) if job.node_list else None
    if stored is None:
        return None
    revision = topology_revision_latest()
    key = "ranks:summary:" + _digest(FIGURE_VERSION, stored.pk, stored.modified.isoformat(), ",".join(job.node_list),
                                     revision.pk if revision else "", revision.created.isoformat() if revision else "")
    cached = cache.get(key)
    if cached is not None:
        return cached
    try:
        analysis = _analysis(job)
    except LayoutNoLongerFits as exc:
        return PanelSummary(findings=[Finding("warning", "The stored Megatron layout no longer fits this job's nodes",
                                              action=str(exc), link=LINK, source=SOURCE)])
    if analysis is None:
        return None
    ranks = analysis["ranks"]
    part = ranks_summary(ranks.layout, ranks.table, analysis["spans"], analysis["boundaries"],
                         exact_map=ranks.stored.rank_map is not None)
    cache.set(key, part, SUMMARY_SECONDS)
    return part


def _digest(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(f"{part}\x1f".encode())
    return digest.hexdigest()[:32]


FIGURE_VERSION = "1"  # part of every ETag: change it when the figure's code changes what it draws


def _colouring_values(job, ranks: JobRanks, colour: str):
    """(colouring, its values for ``job``) for a GPU colouring, (None, None) for a coordinate.

    Raises :class:`ColourUnavailable` when ``colour`` is neither a coordinate of the layout nor a
    colouring with something for this job."""
    sizes = ranks.layout.sizes_by_name
    colouring = gpu_colouring(colour) if colour not in DIMENSION_LABELS else None
    colourings = available_gpu_colourings(job) if colouring is not None else []
    if colour not in [key for key, _ in colour_options(sizes, colourings)]:
        offered = ", ".join(key for key, _ in colour_options(sizes, available_gpu_colourings(job)))
        if colouring is not None:
            raise ColourUnavailable(f"{colouring.title} is not available for this job yet; choose one of {offered}")
        raise ColourUnavailable(f"{colour!r} is not a colouring of this job's rank map; choose one of {offered}")
    if colouring is None:
        return None, None
    values = colouring.fn(job)
    if values is None:
        raise ColourUnavailable(f"{colouring.title} has nothing for this job yet")
    return colouring, values


def figure_answer(job, ranks: JobRanks, colour: str, fields: dict[str, str]) -> tuple[str, Callable[[], dict]]:
    """(version, build) for the figure endpoint: the version changes whenever the answer would (layout,
    node list, topology revision, colour, selection text, the colouring's values); ``build()``
    computes the body (:func:`figure_payload`), so a cached answer or a 304 can skip it.

    Raises :class:`ColourUnavailable` like :func:`figure_payload`."""
    colouring, values = _colouring_values(job, ranks, colour)
    revision = topology_revision_latest()
    version = _digest(FIGURE_VERSION, ranks.stored.pk, ranks.stored.modified.isoformat(), ",".join(job.node_list or []),
                      revision.pk if revision else "", revision.created.isoformat() if revision else "", colour,
                      json.dumps(fields, sort_keys=True),
                      json.dumps(sorted([str(host), int(gpu), value] for (host, gpu), value in values.items()), default=str)
                      if values is not None else "")
    return version, lambda: figure_payload(job, ranks, colour, fields, _resolved=(colouring, values))


def figure_payload(job, ranks: JobRanks, colour: str, fields: dict[str, str], *, _resolved=None) -> dict:
    """The body of the figure endpoint: the rank map coloured by ``colour`` with the selection of
    ``fields`` ({"dp": "1", "pp": "6,7", ...}); a field with a problem is left out of the selection
    and explained in ``errors`` (the page says the same next to the field).

    Raises :class:`ColourUnavailable` when ``colour`` is neither a coordinate of the layout nor a
    colouring with something for this job."""
    layout, table = ranks.layout, ranks.table
    colouring, values = _resolved if _resolved is not None else _colouring_values(job, ranks, colour)
    selection, errors = read_selections(fields, selection_sizes(ranks))
    selected = table.select(**selection) if any(selection.values()) else None
    figure = rank_figure(table, colour=colour, selected=selected, show_cp=layout.cp > 1, colouring=colouring,
                         gpu_values=values)
    return {
        "figure": json.loads(figure.to_json()),
        "colour": colour,
        "note": _note_for(colour),
        "selected_ranks": None if selected is None else int(np.size(selected)),
        "errors": errors,
        "grid_selected": grid_selected(table, selected, min(layout.dp, MAX_GRID_COLUMNS)),
    }
