"""Ranks joined with the hardware: rank → coordinates → host → GPU → NIC → switch → group.

Pure: must not import django.

A :class:`RankTable` holds one numpy column per attribute, indexed by rank, so selecting
"DP replica 1, stages 6-7" or classifying every pipeline boundary of a 10,752-rank job is a few
array operations.
"""
from dataclasses import dataclass

import numpy as np

from apps.topology.placement import HOP_CLASSES, TopologyIndex

DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")


class PlacementError(ValueError):
    """The rank map does not fit the job or the topology; the message says which rank and why."""


@dataclass
class RankTable:
    coords: dict[str, np.ndarray]  # dimension → value per rank (tp, cp, ep, dp, pp, and the expert view)
    hosts: list[str]
    local_rank: np.ndarray
    node_row: np.ndarray  # row in the TopologyIndex
    switch_id: np.ndarray  # dense switch id in the TopologyIndex
    index: TopologyIndex

    @property
    def world_size(self) -> int:
        return len(self.hosts)

    def switch_of(self, rank: int) -> tuple[int, int]:
        return self.index.switch_keys[int(self.switch_id[rank])]

    def group_of(self, rank: int) -> int:
        return int(self.index.switch_group[self.switch_id[rank]])

    def nic_name(self, rank: int) -> str:
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
        """The API's rank records for ``ranks`` (sorted by rank)."""
        records = []
        for rank in sorted(int(r) for r in ranks):
            group, switch = self.switch_of(rank)
            record = {"rank": rank}
            record.update({dimension: int(self.coords[dimension][rank]) for dimension in DIMENSIONS})
            record.update(host=self.hosts[rank], local_rank=int(self.local_rank[rank]), nic=self.nic_name(rank),
                          switch=f"{group}.{switch}", group=group)
            records.append(record)
        return records


def build_rank_table(coords: dict[str, np.ndarray], placement: list[tuple[str, int]], index: TopologyIndex) -> RankTable:
    """Join per-rank coordinates with where each rank runs. Local rank = GPU = NIC lane."""
    hosts = [host for host, _ in placement]
    local = np.fromiter((lane for _, lane in placement), dtype=np.int64, count=len(placement))
    unknown = sorted({host for host in hosts if host not in index.row_of})
    if unknown:
        raise PlacementError(f"{len(unknown)} host(s) of the rank map are not in the topology: {', '.join(unknown[:5])}")
    rows = np.fromiter((index.row_of[host] for host in hosts), dtype=np.int64, count=len(hosts))
    if local.size and (local.min() < 0 or local.max() >= index.nic_switch.shape[1]):
        bad = int(np.flatnonzero((local < 0) | (local >= index.nic_switch.shape[1]))[0])
        raise PlacementError(f"rank {bad}: local rank {int(local[bad])} but {hosts[bad]} has {index.nic_switch.shape[1]} NICs")
    switches = index.nic_switch[rows, local]
    missing = np.flatnonzero(switches < 0)
    if missing.size:
        rank = int(missing[0])
        raise PlacementError(f"rank {rank}: {hosts[rank]} has no NIC hsn{int(local[rank])}")
    return RankTable(coords=coords, hosts=hosts, local_rank=local, node_row=rows, switch_id=switches, index=index)


# ---------------------------------------------------------------------------------------------
# Communicators
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommunicatorSpan:
    kind: str
    groups: int  # communicator groups of this kind
    size: int
    max_switches: int
    max_dragonfly_groups: int
    spanning_groups: int  # communicator groups that span more than one dragonfly group

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _distinct_per_row(values: np.ndarray) -> np.ndarray:
    """Number of distinct values in each row, without a Python loop over rows."""
    ordered = np.sort(values, axis=1)
    return 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)


def communicator_spans(table: RankTable, groups_by_kind: dict[str, list[list[int]]]) -> list[CommunicatorSpan]:
    spans = []
    switch_group = table.index.switch_group
    for kind, members_list in groups_by_kind.items():
        members = np.asarray(members_list, dtype=np.int64)  # groups × size
        if members.size == 0:
            continue
        switch_ids = table.switch_id[members]
        switch_count = _distinct_per_row(switch_ids)
        group_count = _distinct_per_row(switch_group[switch_ids])
        spans.append(CommunicatorSpan(kind, members.shape[0], members.shape[1], int(switch_count.max()),
                                      int(group_count.max()), int(np.count_nonzero(group_count > 1))))
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
    """Every stage p → p+1 link of every pipeline, as arrays (one entry per link)."""

    table: RankTable
    rank_from: np.ndarray
    rank_to: np.ndarray
    classes: np.ndarray
    hops: np.ndarray

    def __len__(self) -> int:
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
    classes, hops = table.index.pair_hops_rows(table.node_row[first], table.local_rank[first],
                                               table.node_row[second], table.local_rank[second])
    return Boundaries(table, first, second, classes, hops)


def boundary_verdict(boundaries: Boundaries) -> str:
    """One sentence a user can act on: how many pipeline boundaries leave a group, with an example."""
    total = len(boundaries)
    if not total:
        return "There is one pipeline stage: no pipeline boundaries."
    inter = boundaries.count("inter-group")
    crossing_switch = inter + boundaries.count("same group")
    if not inter:
        return (f"All {total} pipeline boundaries stay inside one dragonfly group"
                f"{'' if crossing_switch else ' and on one switch'}; {crossing_switch} cross switches.")
    [example] = boundaries.of_class("inter-group", limit=1)
    return (f"{inter} of {total} pipeline boundaries are inter-group; "
            f"e.g. stage {example.stage}→{example.stage + 1} of replica {example.dp} (tp {example.tp}) "
            f"crosses group {example.group_from} → {example.group_to} (ranks {example.rank_from} → {example.rank_to}, "
            f"{example.hops} inter-switch hops).")


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
    """Rows of pipeline stages × columns of replicas: where tensor lane 0 (cp 0) of each runs."""
    grid = []
    for stage in range(stages):
        cells = []
        for replica in range(replicas):
            rank = rank_of(tp=0, cp=0, dp=replica, pp=stage)
            cells.append({"rank": rank, "host": table.hosts[rank], "group": table.group_of(rank),
                          "switch": table.switch_of(rank), "selected": rank in selected})
        grid.append({"stage": stage, "cells": cells})
    return grid
