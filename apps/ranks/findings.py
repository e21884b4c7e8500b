"""What the ranks panel says on the job page's first screen: the layout in one line, and where its
communicators run that a user can change (each finding with one thing to do).

Pure: must not import django.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from apps.core.panels import Fact, Finding, PanelSummary
from apps.topology.placement import HOP_CLASSES

from .layout import LayoutError, RankLayout
from .ranktable import Boundaries, CommunicatorSpan, RankTable, communicator_spans, pipeline_boundaries

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"  # Megatron's --use-tp-pp-dp-mapping
SOURCE = "ranks"
LINK = "#panel-ranks"


def layout_words(layout: RankLayout) -> str:
    """"TP 4 × PP 8 × DP 16" (× CP, and EP when used)."""
    words = f"TP {layout.tp} × PP {layout.pp} × DP {layout.dp:,}"
    if layout.cp > 1:
        words += f" × CP {layout.cp}"
    if layout.ep > 1:
        words += f", EP {layout.ep}"
    return words


def crossing_stages(table: RankTable, boundaries: Boundaries) -> list[int]:
    """The stages s whose boundary s→s+1 crosses dragonfly groups in at least one pipeline."""
    inter = boundaries.classes == HOP_CLASSES.index("inter-group")
    return [int(stage) for stage in np.unique(table.coords["pp"][boundaries.rank_from[inter]])]


def stage_words(stages: list[int], shown: int = 4) -> str:
    """"6→7", "1→2 and 5→6", "0→1, 2→3, 4→5, 5→6 and 3 more"."""
    parts = [f"{stage}→{stage + 1}" for stage in stages[:shown]]
    if len(stages) > shown:
        return ", ".join(parts) + f" and {len(stages) - shown} more"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def crossings_with_order(layout: RankLayout, table: RankTable, order: str) -> tuple[int, int] | None:
    """(pipeline links leaving a dragonfly group, data-parallel groups spanning more than one) if the
    same ranks on the same GPUs used Megatron's ``order``; None when that order is not valid here."""
    try:
        other = RankLayout(replace(layout.sizes, order=order), layout.world_size)
    except LayoutError:
        return None
    moved = replace(table, coords=other.all_coords())
    [dp] = communicator_spans(moved, {"dp": other.groups_array("dp")}) or [None]
    return (pipeline_boundaries(moved, other.groups_array("pp")).count("inter-group"),
            dp.spanning_groups if dp is not None else 0)


def ranks_summary(layout: RankLayout, table: RankTable, spans: list[CommunicatorSpan], boundaries: Boundaries, *,
                  exact_map: bool) -> PanelSummary:
    """The layout as a fact; findings when tensor-parallel groups leave their node, or pipeline
    boundaries cross dragonfly groups (a warning when Megatron's other rank order would avoid most)."""
    placed = "exact rank map" if exact_map else "placed by Slurm's block distribution"
    facts = [Fact("Layout", layout_words(layout), detail=f"{layout.world_size:,} ranks, {placed}", element_id="fact-ranks-layout")]
    findings = []
    by_kind = {span.kind: span for span in spans}
    tp = by_kind.get("tp")
    if tp is not None and tp.network_groups:
        per_node = int(np.bincount(table.host_ids).max()) if table.world_size else 0
        action = (f"Keep TP at most {per_node} (the GPUs of one node) so each TP group stays on NVLink; give the rest to PP or DP."
                  if layout.tp > per_node else
                  "Place each TP group's ranks on one node (consecutive ranks per node, e.g. srun --distribution=block).")
        findings.append(Finding("warning", f"{tp.network_groups:,} of {tp.groups:,} tensor-parallel groups span up to "
                                           f"{tp.max_nodes} nodes: their traffic leaves NVLink for the network",
                                action=action, link=LINK, source=SOURCE))
    inter = boundaries.count("inter-group")
    if inter:
        stages = crossing_stages(table, boundaries)
        title = (f"Pipeline boundar{'y' if len(stages) == 1 else 'ies'} {stage_words(stages)} cross{'es' if len(stages) == 1 else ''} "
                 f"dragonfly groups ({inter:,} of {len(boundaries):,} stage-to-stage links)")
        # Megatron's other rank order keeps each pipeline on neighbouring nodes, but spreads the data-parallel
        # groups (the gradient all-reduce) over the job: advise it only when that does not cost more.
        alternative = crossings_with_order(layout, table, TP_PP_DP_ORDER) if layout.sizes.order == DEFAULT_ORDER else None
        dp_spanning = by_kind["dp"].spanning_groups if "dp" in by_kind else 0
        if alternative is not None and alternative[0] * 2 <= inter and alternative[1] <= dp_spanning:
            findings.append(Finding("warning", title, link=LINK, source=SOURCE,
                                    action=f"Run with --use-tp-pp-dp-mapping (order {TP_PP_DP_ORDER}): on these GPUs "
                                           f"{alternative[0]:,} instead of {inter:,} links would cross groups, and no more "
                                           "data-parallel groups would."))
        else:
            findings.append(Finding("info", title, link=LINK, source=SOURCE,
                                    action="If these stages wait on each other, keep each pipeline in one dragonfly group: "
                                           "an exact rank map that groups its stages, or fewer groups (sbatch --switches)."))
    return PanelSummary(facts=facts, findings=findings)
