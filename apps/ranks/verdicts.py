"""How each communicator of a Megatron layout is likely to perform where it runs: one verdict per kind
(tp, cp, ep, dp, pp, mp, dp-cp), a level (ok, warning, critical) and one sentence with its reason.

Plain Python: must not import django. The placement comes from :mod:`apps.ranks.ranktable` (which
groups stay on one node's NVLink, which leave a dragonfly group); the load of the global links, when
the caller has it, is a fraction of capacity per dragonfly group pair ((a, b), a < b), as the
network measurement gives it (``apps.core.link_colourings.LinkLoads.pairs``).

What each kind sends, and so what its placement costs (Megatron-LM):

* **TP** — an all-reduce (or reduce-scatter/all-gather) of the activations in every layer, forward and
  backward, on the critical path: it belongs on NVLink. A TP group across nodes runs it over the
  Slingshot NICs (25 GB/s per direction, several times less than NVLink).
* **CP** — ring attention: each layer passes K/V blocks around the CP ranks; heavy, only partly
  hidden behind the attention compute, so it wants NVLink too.
* **EP** — the token dispatch and combine of every MoE layer is an all-to-all: every rank sends to
  every other, so the slowest path decides; across dragonfly groups that path is a global link.
* **DP** (and dp-cp) — the gradient all-reduce (reduce-scatter with the distributed optimizer), once
  per step and overlapped with the backward pass: fine inside a dragonfly group, exposed when it
  crosses global links, and slowed when another job fills those links.
* **PP** — point-to-point sends of one micro-batch's activations between neighbouring stages: little
  traffic, usually fine anywhere unless a link it crosses is saturated.
* **MP** (tp × pp) — a few numbers per step (loss, gradient norm): no concern.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping

import numpy as np

from .ranktable import CommunicatorSpan, RankTable

LEVELS = ("ok", "warning", "critical")
SATURATED = 0.8  # a global link pair at or above this fraction of its capacity is called saturated

Pair = tuple[int, int]


@dataclass(frozen=True)
class Verdict:
    """How one communicator kind is likely to perform: ``level`` ok | warning | critical, ``words`` one
    sentence that starts with the judgement ("fast: NVLink — ...") and gives its reason."""

    kind: str
    level: str
    words: str

    def as_dict(self) -> dict:
        return {"level": self.level, "verdict": self.words}


@dataclass(frozen=True)
class Crossing:
    """The dragonfly group pairs the communicator groups of one kind span: ``pairs`` maps (a, b), a < b,
    to how many of its groups have ranks in both; ``cables`` the global cables between those pairs in
    the topology."""

    pairs: dict[Pair, int] = field(default_factory=dict)
    cables: int = 0


def crossing(table: RankTable, members) -> Crossing:
    """The group pairs the communicator groups ``members`` (groups × size, ranks) span, over the ranks
    the topology places, and the global cables between those pairs."""
    members = np.asarray(members, dtype=np.int64)
    if members.size == 0 or not len(table.index.switch_group):
        return Crossing()
    switches = table.switch_id[members]
    groups = np.where(switches >= 0, table.index.switch_group[np.maximum(switches, 0)], -1)
    highest = groups.max(axis=1)
    lowest = np.where(groups >= 0, groups, np.iinfo(np.int64).max).min(axis=1)
    pairs: dict[Pair, int] = {}
    for row in np.flatnonzero((highest >= 0) & (lowest < highest)):  # rows with ranks in two groups or more
        present = [int(g) for g in np.unique(groups[row]) if g >= 0]
        for pair in combinations(present, 2):
            pairs[pair] = pairs.get(pair, 0) + 1
    cables = 0
    for link in table.index.topology.global_links:
        pair = (min(link.group_a, link.group_b), max(link.group_a, link.group_b))
        if pair in pairs:
            cables += max(1, link.links)
    return Crossing(pairs, cables)


def gpus_per_node(table: RankTable) -> int:
    """GPUs per node: the NICs per node of the topology (one per GPU), or the most ranks the job runs on
    one node if that is more (a host outside the topology)."""
    most = int(np.bincount(table.host_ids).max()) if table.world_size else 0
    return max(int(table.index.lanes), most)


def _s(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def _pair_words(pair: Pair) -> str:
    return f"dragonfly groups {pair[0]} ↔ {pair[1]}"


def saturated_pair(crossed: Crossing, loads: Mapping[Pair, float] | None) -> tuple[Pair, float] | None:
    """The busiest crossed group pair at or above :data:`SATURATED`, with its load; None without."""
    if not loads or not crossed.pairs:
        return None
    measured = [(loads[pair], pair) for pair in crossed.pairs if loads.get(pair) is not None]
    if not measured:
        return None
    load, pair = max(measured, key=lambda item: (item[0], -item[1][0], -item[1][1]))
    return (pair, load) if load >= SATURATED else None


def _saturation_words(hot: tuple[Pair, float]) -> str:
    pair, load = hot
    return (f"the global links between {_pair_words(pair)} are saturated, at {100 * load:.0f} % of their capacity "
            "(this job's traffic and its neighbours' together)")


def _network_who(span: CommunicatorSpan, noun: str) -> str:
    """"3 of 8 CP groups span up to 2 nodes" / "the CP group spans 2 nodes"."""
    if span.groups == 1:
        return f"the {noun} group spans {span.max_nodes:,} nodes"
    return f"{span.network_groups:,} of {span.groups:,} {noun} groups span up to {span.max_nodes:,} nodes"


def _leaving(span: CommunicatorSpan, noun: str) -> str:
    if span.groups == 1:
        return f"the {noun} group spans {span.max_dragonfly_groups:,} dragonfly groups"
    return (f"{span.spanning_groups:,} of {span.groups:,} {noun} groups span up to "
            f"{span.max_dragonfly_groups:,} dragonfly groups")


def _links(crossed: Crossing) -> str:
    """"the 2 global links between dragonfly groups 0 ↔ 1" / "24 global links between 6 group pairs"."""
    if len(crossed.pairs) == 1:
        [pair] = crossed.pairs
        count = f"the {_s(crossed.cables, 'global link')}" if crossed.cables else "the global links"
        return f"{count} between {_pair_words(pair)}"
    if crossed.cables:
        return f"{_s(crossed.cables, 'global link')} between {_s(len(crossed.pairs), 'group pair')}"
    return f"the global links of {_s(len(crossed.pairs), 'group pair')}"


NOT_USED = {
    "tp": "not used: TP 1, no tensor-parallel traffic.",
    "cp": "not used: CP 1, no context parallelism (no ring attention).",
    "ep": "not used: EP 1, no expert parallelism (no all-to-all).",
    "dp": "not used: DP 1, one replica, no gradient all-reduce.",
    "dp-cp": "not used: DP × CP 1, no gradient all-reduce.",
    "pp": "not used: PP 1, one pipeline stage.",
    "mp": "not used: TP × PP 1.",
}


def communicator_verdict(span: CommunicatorSpan, *, per_node: int, crossed: Crossing | None = None,
                         loads: Mapping[Pair, float] | None = None) -> Verdict:
    """The verdict for ``span`` (see the module docstring for what each kind sends). ``per_node``: GPUs
    per node (for the advice to keep a group on one node); ``crossed``: the dragonfly group pairs its
    groups span; ``loads``: measured load per group pair (None: not measured)."""
    kind = span.kind
    crossed = crossed or Crossing()
    if span.size <= 1:
        return Verdict(kind, "ok", NOT_USED.get(kind, f"not used: {kind} 1."))
    hot = saturated_pair(crossed, loads)
    if kind == "mp":
        return Verdict(kind, "ok", "no concern: the model-parallel group reduces a few numbers per step (loss, "
                                   "gradient norm), wherever it runs.")
    if not span.network_groups:
        reason = {
            "tp": "each TP group stays inside one node, where its all-reduces of every layer belong.",
            "cp": "each CP group stays inside one node, so ring attention passes its K/V blocks over NVLink.",
            "ep": "each EP group stays inside one node, so the all-to-all of every MoE layer stays on NVLink.",
            "pp": "each pipeline stays inside one node.",
        }.get(kind, "each group stays inside one node, so its gradient all-reduce stays on NVLink.")
        return Verdict(kind, "ok", f"fast: NVLink — {reason}")
    if kind == "tp":
        advice = (f"keep TP ≤ {per_node} GPUs per node" if per_node and span.size > per_node else
                  "place each TP group on one node (consecutive ranks per node, srun --distribution=block)")
        level = "critical" if span.spanning_groups else "warning"
        where = ""
        if span.spanning_groups:
            where = (f", in {span.max_dragonfly_groups:,} dragonfly groups" if span.groups == 1 else
                     f"; {span.spanning_groups:,} leave their dragonfly group")
        return Verdict(kind, level, f"slow: TP all-reduces leave NVLink for the Slingshot NICs every layer "
                                    f"({_network_who(span, 'TP')}{where}) — {advice}.")
    if kind == "cp":
        if span.spanning_groups:
            tail = f", and {_saturation_words(hot)}" if hot else ""
            return Verdict(kind, "critical", f"slow: ring attention passes K/V blocks over {_links(crossed)} every layer "
                                             f"({_leaving(span, 'CP')}){tail} — keep each CP group inside one node "
                                             f"(TP × CP ≤ {per_node} GPUs) or at least one dragonfly group.")
        return Verdict(kind, "warning", f"slow: ring attention passes K/V blocks over the network every layer "
                                        f"({_network_who(span, 'CP')}), only partly hidden behind attention — keep "
                                        f"TP × CP ≤ {per_node} GPUs per node where the sequence allows.")
    if kind == "ep":
        if span.spanning_groups:
            tail = f", and {_saturation_words(hot)}" if hot else ""
            return Verdict(kind, "critical", f"slow: the all-to-all of every MoE layer crosses {_links(crossed)} "
                                             f"({_leaving(span, 'EP')}){tail}; every rank sends to every other, so the "
                                             "slowest global link decides — keep EP groups inside one dragonfly group "
                                             "(sbatch --switches) or lower EP.")
        return Verdict(kind, "warning", f"heavy: the all-to-all of every MoE layer runs over the network "
                                        f"({_network_who(span, 'EP')}) inside one dragonfly group — fine if the "
                                        "experts' compute hides it; keep EP × ETP ≤ "
                                        f"{per_node} GPUs per node if it does not.")
    if kind == "pp":
        if not span.spanning_groups:
            return Verdict(kind, "ok", "usually fine: point-to-point activations between neighbouring stages, little "
                                       "traffic, inside one dragonfly group.")
        if hot:
            return Verdict(kind, "warning", f"mostly fine: point-to-point activations between neighbouring stages, "
                                            f"but {_saturation_words(hot)} — stage hand-offs that cross them wait "
                                            "there.")
        return Verdict(kind, "ok", f"usually fine: point-to-point activations between neighbouring stages, little "
                                   f"traffic, even where {_s(span.spanning_groups, 'pipeline')} cross dragonfly groups.")
    # dp, dp-cp and any other data-parallel style reduction
    noun = "DP × CP" if kind == "dp-cp" else "DP"
    if not span.spanning_groups:
        return Verdict(kind, "ok", "fine: the gradient all-reduce runs once per step, overlapped with the backward "
                                   "pass, inside one dragonfly group.")
    if hot:
        return Verdict(kind, "critical", f"exposed: the gradient all-reduce crosses {_links(crossed)} "
                                         f"({_leaving(span, noun)}), and {_saturation_words(hot)} — every step waits "
                                         "there; ask Slurm for fewer dragonfly groups (sbatch --switches=<n>@<max-wait>).")
    return Verdict(kind, "warning", f"exposed: the gradient all-reduce crosses {_links(crossed)} "
                                    f"({_leaving(span, noun)}); once per step and overlapped with the backward pass, "
                                    "but a neighbour that fills those links slows every step.")


def communicator_verdicts(table: RankTable, spans: list[CommunicatorSpan], groups_by_kind: Mapping[str, object],
                          loads: Mapping[Pair, float] | None = None) -> dict[str, Verdict]:
    """Per kind of ``spans``: its :class:`Verdict`. ``groups_by_kind`` gives the groups (ranks) of each
    kind that leaves a dragonfly group, for the group pairs it crosses; ``loads`` the measured load per
    group pair, if any."""
    per_node = gpus_per_node(table)
    return {span.kind: communicator_verdict(span, per_node=per_node, loads=loads,
                                            crossed=crossing(table, groups_by_kind[span.kind]) if span.spanning_groups else None)
            for span in spans}


def crosses_groups(spans: list[CommunicatorSpan]) -> bool:
    """Whether any communicator leaves a dragonfly group (only then do link loads change a verdict)."""
    return any(span.spanning_groups and span.size > 1 for span in spans)


def layout_verdicts(layout, table: RankTable, spans: list[CommunicatorSpan],
                    loads: Mapping[Pair, float] | None = None) -> dict[str, Verdict]:
    """:func:`communicator_verdicts` of ``spans`` with the groups of ``layout`` (a
    :class:`apps.ranks.layout.RankLayout`; only the kinds that leave a dragonfly group are asked for)."""
    groups = {span.kind: layout.groups_array(span.kind) for span in spans if span.spanning_groups}
    return communicator_verdicts(table, spans, groups, loads)
