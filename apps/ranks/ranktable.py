"""Ranks joined with the hardware: rank → coordinates → host → GPU → NIC → switch → group.

Pure: must not import django.

A :class:`RankTable` holds one numpy column per attribute, indexed by rank, so selecting
"DP replica 1, stages 6-7" or classifying every pipeline boundary of a 10,752-rank job is a few
array operations.
"""
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from apps.topology.placement import HOP_CLASSES, TopologyIndex

DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")


@dataclass(frozen=True)
class PlacementGaps:
    """Ranks the topology cannot place on a NIC: their host is not in the topology, or it has no NIC
    for the rank's local rank. Such ranks keep their host and GPU; NIC, switch and group are unknown."""

    ranks: int = 0  # ranks without a NIC placement
    hosts_outside: tuple[str, ...] = ()  # hosts of the rank map that the topology does not know
    nics_missing: tuple[str, ...] = ()  # "host:hsnN" of known hosts that lack the NIC a rank uses

    def __bool__(self) -> bool:
        return self.ranks > 0

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host with at least one rank without a NIC placement, outside hosts first."""
        return self.hosts_outside + tuple(dict.fromkeys(nic.rsplit(":", 1)[0] for nic in self.nics_missing))

    def message(self, world_size: int, shown: int = 5) -> str:
        if not self.ranks:
            return ""
        parts = []
        if self.hosts_outside:
            parts.append(f"{len(self.hosts_outside)} host(s) are not in the topology ({_listed(self.hosts_outside, shown)})")
        if self.nics_missing:
            parts.append(f"{len(self.nics_missing)} NIC(s) the ranks use are missing from it ({_listed(self.nics_missing, shown)})")
        return (f"{self.ranks} of {world_size} ranks have no NIC placement: {'; '.join(parts)}. They keep their host "
                "and GPU, but have no NIC, switch or group, and are left out of the switch and group counts.")

    def as_dict(self, world_size: int) -> dict:
        return {"ranks_without_nic": self.ranks, "hosts_not_in_topology": list(self.hosts_outside),
                "nics_missing": list(self.nics_missing), "hosts_without_nic_placement": list(self.hosts),
                "message": self.message(world_size) or None}


def _listed(items, shown: int) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


@dataclass
class RankTable:
    coords: dict[str, np.ndarray]  # dimension → value per rank (tp, cp, ep, dp, pp, and the expert view)
    hosts: list[str]
    local_rank: np.ndarray
    node_row: np.ndarray  # row in the TopologyIndex; -1: the host is not in the topology
    switch_id: np.ndarray  # dense switch id in the TopologyIndex; -1: no NIC placement
    index: TopologyIndex
    gaps: PlacementGaps = PlacementGaps()

    @property
    def world_size(self) -> int:
        return len(self.hosts)

    @cached_property
    def host_ids(self) -> np.ndarray:
        """Per rank: a number standing for its host (equal numbers, same node), hosts outside the topology included."""
        return np.unique(np.asarray(self.hosts), return_inverse=True)[1].astype(np.int64).reshape(-1)

    @property
    def placed(self) -> np.ndarray:
        """Per rank: True when the topology places it on a NIC (hence a switch and a group)."""
        return self.switch_id >= 0

    def switch_of(self, rank: int) -> tuple[int, int] | None:
        switch = int(self.switch_id[rank])
        return None if switch < 0 else self.index.switch_keys[switch]

    def group_of(self, rank: int) -> int | None:
        switch = int(self.switch_id[rank])
        return None if switch < 0 else int(self.index.switch_group[switch])

    def nic_name(self, rank: int) -> str | None:
        if self.switch_id[rank] < 0:
            return None
        node = self.index.topology.nodes[int(self.node_row[rank])]
        lane = int(self.local_rank[rank])
        return next((nic.name for nic in node.nics if nic.index == lane), "")

    def select(self, **wanted: list[int] | None) -> np.ndarray:
        """Ranks whose coordinates are in the given value lists (``None``/empty = any)."""
        mask = np.ones(self.world_size, dtype=bool)
        for dimension, values in wanted.items():
            if values:
                mask &= np.isin(self.coords[dimension], values)
        return np.flatnonzero(mask)

    def rows(self, ranks) -> list[dict]:
        """The API's rank records for ``ranks`` (sorted by rank); nic, switch and group are None for
        a rank without a NIC placement."""
        records = []
        for rank in sorted(int(r) for r in ranks):
            switch = self.switch_of(rank)
            record = {"rank": rank}
            record.update({dimension: int(self.coords[dimension][rank]) for dimension in DIMENSIONS})
            record.update(host=self.hosts[rank], local_rank=int(self.local_rank[rank]), nic=self.nic_name(rank),
                          switch=None if switch is None else f"{switch[0]}.{switch[1]}",
                          group=None if switch is None else switch[0])
            records.append(record)
        return records


def build_rank_table(coords: dict[str, np.ndarray], placement: list[tuple[str, int]], index: TopologyIndex) -> RankTable:
    """Join per-rank coordinates with where each rank runs. Local rank = GPU = NIC lane.

    Every rank keeps the host and local rank ``placement`` gives it. A rank whose host is not in the
    topology, or whose host has no NIC for its local rank, gets no switch (``switch_id`` -1) and is
    counted in :attr:`RankTable.gaps`; nothing is refused."""
    hosts = [host for host, _ in placement]
    local = np.fromiter((lane for _, lane in placement), dtype=np.int64, count=len(placement))
    rows = np.fromiter((index.row_of.get(host, -1) for host in hosts), dtype=np.int64, count=len(hosts))
    lanes = index.nic_switch.shape[1]
    usable = (rows >= 0) & (local >= 0) & (local < lanes)
    switches = np.full(len(hosts), -1, dtype=np.int64)
    switches[usable] = index.nic_switch[rows[usable], local[usable]]
    gaps = PlacementGaps()
    unplaced = np.flatnonzero(switches < 0)
    if unplaced.size:
        outside = tuple(dict.fromkeys(hosts[rank] for rank in unplaced if rows[rank] < 0))
        missing = tuple(dict.fromkeys(f"{hosts[rank]}:hsn{int(local[rank])}" for rank in unplaced if rows[rank] >= 0))
        gaps = PlacementGaps(ranks=int(unplaced.size), hosts_outside=outside, nics_missing=missing)
    return RankTable(coords=coords, hosts=hosts, local_rank=local, node_row=rows, switch_id=switches, index=index, gaps=gaps)


# ---------------------------------------------------------------------------------------------
# Communicators
# ---------------------------------------------------------------------------------------------
COMMUNICATOR_WORDS = {
    "tp": "tensor parallel", "pp": "pipeline", "dp": "data parallel", "cp": "context parallel",
    "dp-cp": "data + context parallel", "ep": "expert parallel", "mp": "model parallel",
}


@dataclass(frozen=True)
class CommunicatorSpan:
    """Where the communicator groups of one kind run.

    A group whose ranks all sit on one node talks over NVLink only (``inside_node``); the others use
    the network, and ``max_nodes``, ``max_switches``, ``max_dragonfly_groups`` describe those only (0
    when every group stays inside a node): the NICs of one node hang on several switches, but
    traffic between its GPUs never reaches them."""

    kind: str
    groups: int  # communicator groups of this kind
    size: int
    max_switches: int  # over the groups that use the network
    max_dragonfly_groups: int  # over the groups that use the network
    spanning_groups: int  # communicator groups that span more than one dragonfly group
    groups_with_unplaced_ranks: int = 0  # groups with a rank without NIC placement (counted over the others)
    inside_node: int = 0  # groups whose ranks all run on one node: NVLink only
    max_nodes: int = 1  # the most nodes one group spans

    @property
    def network_groups(self) -> int:
        """Groups with ranks on more than one node: their traffic crosses the network."""
        return self.groups - self.inside_node

    @property
    def words(self) -> str:
        """One sentence for the communicators table (the kind is named beside it)."""
        if self.groups == self.inside_node:
            if self.groups == 1:
                return "The group stays inside one node: NVLink only."
            return f"All {self.groups:,} groups stay inside one node: NVLink only."
        if self.inside_node:
            who = (f"{self.inside_node:,} of {self.groups:,} stay{'s' if self.inside_node == 1 else ''} inside one node "
                   f"(NVLink only); the other {self.network_groups:,}")
        else:
            who = "The group" if self.groups == 1 else f"All {self.groups:,}"
        crosses = "crosses" if self.network_groups == 1 else "cross"
        reach = (f"up to {self.max_nodes:,} nodes on {self.max_switches:,} switch{'es' if self.max_switches != 1 else ''} "
                 f"in {self.max_dragonfly_groups:,} dragonfly group{_s(self.max_dragonfly_groups)}")
        if self.spanning_groups:
            leave = (f"{self.spanning_groups:,} leave{'s' if self.spanning_groups == 1 else ''} a dragonfly group"
                     if self.network_groups > 1 else "it leaves its dragonfly group")
        else:
            leave = "none leaves a dragonfly group" if self.network_groups > 1 else "it stays in one dragonfly group"
        return f"{who} {crosses} the network: {reach}; {leave}."

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _distinct_per_row(values: np.ndarray, known: np.ndarray | None = None) -> np.ndarray:
    """Number of distinct values in each row, without a Python loop over rows; with ``known``, only
    the entries marked True count (values must then be >= 0)."""
    if known is not None:
        values = np.where(known, values, -1)
    ordered = np.sort(values, axis=1)
    distinct = 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)
    if known is not None:
        distinct -= ~known.all(axis=1)  # -1 stood for the unknown entries: not a value
    return distinct


def communicator_spans(table: RankTable, groups_by_kind: dict[str, list[list[int]]]) -> list[CommunicatorSpan]:
    """Per kind: how many groups stay inside one node (NVLink), and how many switches and dragonfly
    groups the others span, over the ranks the topology places (ranks without NIC placement are
    counted in ``groups_with_unplaced_ranks``)."""
    spans = []
    switch_group = table.index.switch_group
    host_ids = table.host_ids
    for kind, members_list in groups_by_kind.items():
        members = np.asarray(members_list, dtype=np.int64)  # groups × size
        if members.size == 0:
            continue
        node_count = _distinct_per_row(host_ids[members])
        network = node_count > 1
        switch_ids = table.switch_id[members]
        known = switch_ids >= 0
        switch_count = np.where(network, _distinct_per_row(switch_ids, known), 0)
        # Only placed ranks have a switch, hence a group; the others stay -1 (with no topology loaded at all,
        # ``switch_group`` is empty and no rank is placed).
        group_ids = np.full(switch_ids.shape, -1, dtype=np.int64)
        group_ids[known] = switch_group[switch_ids[known]]
        group_count = np.where(network, _distinct_per_row(group_ids, known), 0)
        spans.append(CommunicatorSpan(kind, members.shape[0], members.shape[1], int(switch_count.max()),
                                      int(group_count.max()), int(np.count_nonzero(group_count > 1)),
                                      int(np.count_nonzero(~known.all(axis=1))),
                                      inside_node=int(np.count_nonzero(~network)), max_nodes=int(node_count.max())))
    return spans


@dataclass(frozen=True)
class Boundary:
    dp: int
    tp: int
    cp: int
    stage: int  # from stage, to stage + 1
    rank_from: int
    rank_to: int
    hop_class: str
    hops: int
    group_from: int
    group_to: int


@dataclass
class Boundaries:
    """Every stage p → p+1 link of every pipeline whose two ranks the topology places, as arrays (one
    entry per link); ``unplaced`` counts the links with a rank without NIC placement."""

    table: RankTable
    rank_from: np.ndarray
    rank_to: np.ndarray
    classes: np.ndarray
    hops: np.ndarray
    unplaced: int = 0

    def __len__(self) -> int:
        """All boundaries, classified or not."""
        return int(self.rank_from.size) + self.unplaced

    @property
    def classified(self) -> int:
        return int(self.rank_from.size)

    def count(self, hop_class: str) -> int:
        return int(np.count_nonzero(self.classes == HOP_CLASSES.index(hop_class)))

    def of_class(self, hop_class: str, limit: int | None = None) -> list[Boundary]:
        positions = np.flatnonzero(self.classes == HOP_CLASSES.index(hop_class))[:limit]
        coords, switch_group, switch_id = self.table.coords, self.table.index.switch_group, self.table.switch_id
        return [
            Boundary(int(coords["dp"][a]), int(coords["tp"][a]), int(coords["cp"][a]), int(coords["pp"][a]), int(a), int(b),
                     hop_class, int(self.hops[i]), int(switch_group[switch_id[a]]), int(switch_group[switch_id[b]]))
            for i, a, b in ((i, self.rank_from[i], self.rank_to[i]) for i in positions)
        ]


def pipeline_boundaries(table: RankTable, pp_groups) -> Boundaries:
    """Every stage p → p+1 link of every pipeline (one per dp replica, tp lane and cp rank)."""
    members = np.asarray(pp_groups, dtype=np.int64)
    if members.size == 0 or members.shape[1] < 2:
        empty = np.zeros(0, dtype=np.int64)
        return Boundaries(table, empty, empty, empty, empty)
    first, second = members[:, :-1].ravel(), members[:, 1:].ravel()
    both = table.placed[first] & table.placed[second]
    unplaced = int(first.size - np.count_nonzero(both))
    first, second = first[both], second[both]
    classes, hops = table.index.pair_hops_rows(table.node_row[first], table.local_rank[first],
                                               table.node_row[second], table.local_rank[second])
    return Boundaries(table, first, second, classes, hops, unplaced)


SPAN_KINDS = ("tp", "pp", "dp", "cp", "dp-cp", "ep", "mp")  # the communicators a layout summary looks at


@dataclass(frozen=True)
class LayoutAnalysis:
    """Where a layout's communicators and pipeline boundaries fall on the hardware: what the layout
    API answers and the job page's ranks panel shows."""

    spans: list[CommunicatorSpan]
    boundaries: Boundaries


def analyse_layout(layout, table: RankTable, kinds: tuple[str, ...] = SPAN_KINDS) -> LayoutAnalysis:
    """:func:`communicator_spans` of ``kinds`` and :func:`pipeline_boundaries` of ``layout`` (a
    :class:`apps.ranks.layout.RankLayout`) placed by ``table``."""
    spans = communicator_spans(table, {kind: layout.groups_array(kind) for kind in kinds})
    return LayoutAnalysis(spans, pipeline_boundaries(table, layout.groups_array("pp")))


def boundary_verdict(boundaries: Boundaries) -> str:
    """One sentence a user can act on: how many pipeline boundaries leave a group, with an example."""
    total = len(boundaries)
    if not total:
        return "There is one pipeline stage: no pipeline boundaries."
    classified = boundaries.classified
    if not classified:
        return (f"None of the {total} pipeline boundaries can be placed on the network: their ranks have no NIC "
                "placement in the topology.")
    # Boundaries with a rank the topology cannot place are left out of the verdict, and said so.
    of = f"{classified} placed" if boundaries.unplaced else f"{total}"
    unplaced = (f" {boundaries.unplaced} of {total} boundaries involve ranks without NIC placement and are not classified."
                if boundaries.unplaced else "")
    inter = boundaries.count("inter-group")
    crossing_switch = inter + boundaries.count("same group")
    if not inter:
        return (f"All {of} pipeline boundaries stay inside one dragonfly group"
                f"{'' if crossing_switch else ' and on one switch'}; {crossing_switch} cross switches.{unplaced}")
    [example] = boundaries.of_class("inter-group", limit=1)
    return (f"{inter} of {of} pipeline boundaries are inter-group; "
            f"e.g. stage {example.stage}→{example.stage + 1} of replica {example.dp} (tp {example.tp}) "
            f"crosses group {example.group_from} → {example.group_to} (ranks {example.rank_from} → {example.rank_to}, "
            f"{example.hops} inter-switch hops).{unplaced}")


# ---------------------------------------------------------------------------------------------
# Views of the table for the job page
# ---------------------------------------------------------------------------------------------
def node_labels(table: RankTable, dimension: str, selected: np.ndarray | None) -> tuple[dict[str, str], tuple[str, ...]]:
    """One label per node, and the labels to draw muted.

    Without a selection: the ``dimension``'s value when all the node's ranks share it, else
    "<dimension> mixed". With one: "selected ranks" for nodes holding any, "other ranks" else.
    """
    if selected is not None:
        chosen = {table.hosts[rank] for rank in selected}
        return {host: ("selected ranks" if host in chosen else "other ranks") for host in table.hosts}, ("other ranks",)
    values_by_host: dict[str, set[int]] = {}
    for rank, host in enumerate(table.hosts):
        values_by_host.setdefault(host, set()).add(int(table.coords[dimension][rank]))
    labels = {host: f"{dimension} {min(values)}" if len(values) == 1 else f"{dimension} mixed"
              for host, values in values_by_host.items()}
    return labels, (f"{dimension} mixed",)


def node_rank_notes(table: RankTable, show_cp: bool, limit: int = 8) -> dict[str, str]:
    """Per node, the ranks it runs with their coordinates (GPU i = local rank i), for hover text."""
    ranks_by_host: dict[str, list[int]] = {}
    for rank, host in enumerate(table.hosts):
        ranks_by_host.setdefault(host, []).append(rank)
    coords = table.coords
    return {
        host: "<br>".join(f"GPU {int(table.local_rank[r])}: rank {r} (tp {int(coords['tp'][r])}, dp {int(coords['dp'][r])}, "
                          f"pp {int(coords['pp'][r])}{', cp ' + str(int(coords['cp'][r])) if show_cp else ''})"
                          for r in ranks[:limit])
        for host, ranks in ranks_by_host.items()
    }


def stage_replica_grid(table: RankTable, rank_of, stages: int, replicas: int, selected: set[int]) -> list[dict]:
    """Rows of pipeline stages × columns of replicas: where tensor lane 0 (cp 0) of each runs. A cell
    is selected when any of ``selected`` (ranks) has its stage and replica, whatever its lane."""
    chosen = {(int(table.coords["pp"][rank]), int(table.coords["dp"][rank])) for rank in selected}
    grid = []
    for stage in range(stages):
        cells = []
        for replica in range(replicas):
            rank = rank_of(tp=0, cp=0, dp=replica, pp=stage)
            cells.append({"rank": rank, "host": table.hosts[rank], "group": table.group_of(rank),
                          "switch": table.switch_of(rank), "selected": (stage, replica) in chosen})
        grid.append({"stage": stage, "cells": cells})
    return grid
