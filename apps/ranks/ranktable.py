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


def communicator_spans(table: RankTable, groups_by_kind: dict[str, list[list[int]]]) -> list[CommunicatorSpan]:
    spans = []
    switch_group = table.index.switch_group
    for kind, members_list in groups_by_kind.items():
        members = np.asarray(members_list, dtype=np.int64)  # groups × size
        if members.size == 0:
            continue
        switch_ids = table.switch_id[members]
        dragonfly = switch_group[switch_ids]
        switch_count = np.array([len(np.unique(row)) for row in switch_ids])
        group_count = np.array([len(np.unique(row)) for row in dragonfly])
        spans.append(CommunicatorSpan(kind, len(members_list), members.shape[1], int(switch_count.max()),
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


def pipeline_boundaries(table: RankTable, pp_groups: list[list[int]]) -> list[Boundary]:
    """Every stage p → p+1 link of every pipeline (one per dp replica, tp lane and cp rank)."""
    members = np.asarray(pp_groups, dtype=np.int64)
    if members.size == 0 or members.shape[1] < 2:
        return []
    first, second = members[:, :-1].ravel(), members[:, 1:].ravel()
    hosts = table.hosts
    classes, hops = table.index.pair_hops([hosts[r] for r in first], table.local_rank[first],
                                          [hosts[r] for r in second], table.local_rank[second])
    switch_group = table.index.switch_group
    coords = table.coords
    return [
        Boundary(int(coords["dp"][a]), int(coords["tp"][a]), int(coords["cp"][a]), int(coords["pp"][a]), int(a), int(b),
                 HOP_CLASSES[int(c)], int(h), int(switch_group[table.switch_id[a]]), int(switch_group[table.switch_id[b]]))
        for a, b, c, h in zip(first, second, classes, hops)
    ]


def boundary_verdict(boundaries: list[Boundary]) -> str:
    """One sentence a user can act on: how many pipeline boundaries leave a group, with an example."""
    if not boundaries:
        return "There is one pipeline stage: no pipeline boundaries."
    inter = [b for b in boundaries if b.hop_class == "inter-group"]
    crossing_switch = [b for b in boundaries if b.hop_class in ("same group", "inter-group")]
    if not inter:
        return (f"All {len(boundaries)} pipeline boundaries stay inside one dragonfly group"
                f"{'' if crossing_switch else ' and on one switch'}; {len(crossing_switch)} cross switches.")
    example = inter[0]
    return (f"{len(inter)} of {len(boundaries)} pipeline boundaries are inter-group; "
            f"e.g. stage {example.stage}→{example.stage + 1} of replica {example.dp} (tp {example.tp}) "
            f"crosses group {example.group_from} → {example.group_to} (ranks {example.rank_from} → {example.rank_to}, "
            f"{example.hops} inter-switch hops).")
