"""Placement metrics: how a set of nodes (later: ranks) sits on the dragonfly.

Pure: must not import django.

:class:`TopologyIndex` turns a :class:`~apps.topology.model.Topology` into numpy arrays once
(node → group, node × NIC lane → switch, switch × switch → minimal hops), so that the metrics of
a 1,024-node set take milliseconds. Definitions follow the reference notes (§3.1):

* span: nodes, NICs, switches, groups and cabinets used;
* group fragmentation ``F_G = |G| / ceil(|N| / nodes_per_group)`` and switch fragmentation
  ``F_S = |S| / ceil(|E| / nics_per_switch)`` (1 = as compact as the machine allows);
* hop class of a pair: same node, same switch, same group, inter-group; and the number of
  inter-switch links on the minimal route (0, 1, or 1-3 between groups, exact from the L2 map).

Pairs of nodes are compared NIC lane by NIC lane (hsn i with hsn i), the way local rank i of
one node talks to local rank i of another.
"""
from dataclasses import dataclass
from math import ceil
from typing import NamedTuple

import numpy as np

from .model import Topology

HOP_CLASSES = ("same node", "same switch", "same group", "inter-group")
SAME_NODE, SAME_SWITCH, SAME_GROUP, INTER_GROUP = range(4)


class UnknownNodesError(KeyError):
    """Some hostnames are not part of the topology; ``hostnames`` lists them in input order."""

    def __init__(self, hostnames: list[str]):
        super().__init__(hostnames)
        self.hostnames = hostnames

    def __str__(self) -> str:
        shown = ", ".join(self.hostnames[:5]) + (" ..." if len(self.hostnames) > 5 else "")
        return f"{len(self.hostnames)} node(s) not in the topology: {shown}"


@dataclass(frozen=True)
class PairSummary:
    """Over all node pairs: ``pairs`` node pairs give ``nic_pairs`` NIC pairs (one per shared
    lane), counted by hop class in ``by_class``; ``mean_hops`` averages over the NIC pairs."""

    pairs: int
    nic_pairs: int
    by_class: dict[str, int]
    mean_hops: float | None

    def as_dict(self) -> dict:
        return {"pairs": self.pairs, "nic_pairs": self.nic_pairs, "by_class": self.by_class, "mean_hops": self.mean_hops}


@dataclass(frozen=True)
class Placement:
    nodes: int
    nics: int
    switches: int
    groups: int
    cabinets: int
    group_fragmentation: float | None
    switch_fragmentation: float | None
    nodes_per_group: dict[int, int]
    pairs: PairSummary

    def as_dict(self) -> dict:
        return {
            "nodes": self.nodes,
            "nics": self.nics,
            "switches": self.switches,
            "groups": self.groups,
            "cabinets": self.cabinets,
            "group_fragmentation": self.group_fragmentation,
            "switch_fragmentation": self.switch_fragmentation,
            "nodes_per_group": {str(group): count for group, count in self.nodes_per_group.items()},
            "pairs": self.pairs.as_dict(),
        }


class NicPlace(NamedTuple):
    """Where a NIC plugs in: its name, its group and the switch's index in that group."""

    nic: str
    group: int
    switch: int

    @property
    def switch_label(self) -> str:
        """The switch as pages and stored results name it: "group.switch", e.g. "4.5"."""
        return f"{self.group}.{self.switch}"


class TopologyIndex:
    """Array form of a topology for fast metrics. Build once per topology version."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.hostnames = [node.hostname for node in topology.nodes]
        self.row_of = {hostname: row for row, hostname in enumerate(self.hostnames)}
        switch_keys = sorted({(s.group, s.index) for s in topology.switches}
                             | {(nic.group, nic.switch) for node in topology.nodes for nic in node.nics})
        self.switch_keys = switch_keys
        self.switch_id = {key: position for position, key in enumerate(switch_keys)}
        self.switch_group = np.array([group for group, _ in switch_keys], dtype=np.int32)
        groups = sorted(set(self.switch_group.tolist()) | {node.group for node in topology.nodes})
        self.groups = groups
        self.group_id = {group: position for position, group in enumerate(groups)}
        self.switch_group_index = np.array([self.group_id[group] for group in self.switch_group], dtype=np.int32)

        lanes = max((len(node.nics) for node in topology.nodes), default=0)
        self.lanes = lanes
        self.nic_switch = np.full((len(self.hostnames), max(lanes, 1)), -1, dtype=np.int32)
        for row, node in enumerate(topology.nodes):
            for nic in node.nics:
                self.nic_switch[row, nic.index] = self.switch_id[(nic.group, nic.switch)]
        self.node_group = np.array([self.group_id[node.group] for node in topology.nodes], dtype=np.int32)
        cabinets = sorted({node.cabinet or f"group-{node.group}" for node in topology.nodes})
        cabinet_id = {cabinet: position for position, cabinet in enumerate(cabinets)}
        self.node_cabinet = np.array([cabinet_id[node.cabinet or f"group-{node.group}"] for node in topology.nodes], dtype=np.int32)

        nodes_in_group = np.bincount(self.node_group, minlength=len(groups)) if len(self.node_group) else np.zeros(1)
        self.nodes_per_group_capacity = int(nodes_in_group.max()) if nodes_in_group.size else 0
        nics_on_switch = np.bincount(self.nic_switch[self.nic_switch >= 0], minlength=len(switch_keys))
        self.nics_per_switch_capacity = int(nics_on_switch.max()) if nics_on_switch.size else 0
        self.hops = self._minimal_hops(topology)

    def _minimal_hops(self, topology: Topology) -> np.ndarray:
        """Inter-switch links on the minimal route between every pair of switches.

        0 on the same switch; 1 inside a group (L1 is all-to-all); between groups 1 when the two
        switches share an L2 cable, 2 when either of them has a cable to the other's group,
        3 otherwise (L1 + L2 + L1).
        """
        count = len(self.switch_keys)
        group_index = self.switch_group_index
        direct = np.zeros((count, count), dtype=bool)
        reaches_group = np.zeros((count, len(self.groups)), dtype=bool)
        for link in topology.global_links:
            a = self.switch_id.get((link.group_a, link.switch_a))
            b = self.switch_id.get((link.group_b, link.switch_b))
            if a is None or b is None:
                continue
            direct[a, b] = direct[b, a] = True
            reaches_group[a, self.group_id[link.group_b]] = True
            reaches_group[b, self.group_id[link.group_a]] = True
        hops = np.full((count, count), 3, dtype=np.int8)
        one_side = reaches_group[:, group_index] | reaches_group[:, group_index].T
        hops[one_side] = 2
        hops[direct] = 1
        same_group = group_index[:, None] == group_index[None, :]
        hops[same_group] = 1
        np.fill_diagonal(hops, 0)
        return hops

    # -----------------------------------------------------------------------------------------
    def nic_of(self, hostname: str, lane: int) -> NicPlace | None:
        """(NIC name, group, switch index) of NIC ``lane`` of a node — GPU i uses NIC i on GH200 —
        or None when the node or that NIC is not in the topology."""
        row = self.row_of.get(hostname)
        if row is None or not 0 <= lane < self.nic_switch.shape[1] or self.nic_switch[row, lane] < 0:
            return None
        group, switch = self.switch_keys[int(self.nic_switch[row, lane])]
        name = next((nic.name for nic in self.topology.nodes[row].nics if nic.index == lane), f"hsn{lane}")
        return NicPlace(name, int(group), int(switch))

    def rows(self, hostnames) -> np.ndarray:
        """Row numbers of ``hostnames`` (duplicates removed, order kept); unknown ones raise."""
        seen: dict[str, int] = {}
        missing = []
        for hostname in hostnames:
            if hostname in seen:
                continue
            row = self.row_of.get(hostname)
            if row is None:
                missing.append(hostname)
            else:
                seen[hostname] = row
        if missing:
            raise UnknownNodesError(missing)
        return np.fromiter(seen.values(), dtype=np.int64, count=len(seen))

    def placement(self, hostnames) -> Placement:
        rows = self.rows(hostnames)
        n = len(rows)
        switches = self.nic_switch[rows]
        used = switches[switches >= 0]
        unique_switches = np.unique(used)
        group_counts = np.bincount(self.node_group[rows], minlength=len(self.groups))
        groups_used = int(np.count_nonzero(group_counts)) if n else 0
        nics = int(used.size)
        group_fragmentation = (
            groups_used / ceil(n / self.nodes_per_group_capacity) if n and self.nodes_per_group_capacity else None
        )
        switch_fragmentation = (
            len(unique_switches) / ceil(nics / self.nics_per_switch_capacity) if nics and self.nics_per_switch_capacity else None
        )
        return Placement(
            nodes=n,
            nics=nics,
            switches=int(len(unique_switches)),
            groups=groups_used,
            cabinets=int(len(np.unique(self.node_cabinet[rows]))) if n else 0,
            group_fragmentation=None if group_fragmentation is None else round(group_fragmentation, 4),
            switch_fragmentation=None if switch_fragmentation is None else round(switch_fragmentation, 4),
            nodes_per_group={self.groups[g]: int(c) for g, c in enumerate(group_counts) if c},
            pairs=self._all_pairs(rows),
        )

    def _all_pairs(self, rows: np.ndarray) -> PairSummary:
        """Hop classes over every unordered pair of the nodes, NIC lane by NIC lane, by counting
        NICs per switch and per group instead of visiting the n² pairs."""
        n = len(rows)
        node_pairs = n * (n - 1) // 2
        by_class = dict.fromkeys(HOP_CLASSES, 0)
        total_pairs = 0
        hop_sum = 0.0
        switch_count = len(self.switch_keys)
        for lane in range(self.lanes):
            lane_switches = self.nic_switch[rows, lane]
            lane_switches = lane_switches[lane_switches >= 0]
            m = lane_switches.size
            if m < 2:
                continue
            per_switch = np.bincount(lane_switches, minlength=switch_count).astype(np.float64)
            per_group = np.bincount(self.switch_group_index[lane_switches], minlength=len(self.groups))
            pairs = m * (m - 1) // 2
            same_switch = int((per_switch * (per_switch - 1) // 2).sum())
            same_group = int((per_group * (per_group - 1) // 2).sum()) - same_switch
            by_class["same switch"] += same_switch
            by_class["same group"] += same_group
            by_class["inter-group"] += pairs - same_switch - same_group
            active = np.flatnonzero(per_switch)
            counts = per_switch[active]
            hop_sum += float(counts @ self.hops[np.ix_(active, active)] @ counts) / 2
            total_pairs += pairs
        return PairSummary(
            pairs=node_pairs,
            nic_pairs=total_pairs,
            by_class=by_class,
            mean_hops=round(hop_sum / total_pairs, 4) if total_pairs else None,
        )

    # -----------------------------------------------------------------------------------------
    def hop_class(self, host_a: str, lane_a: int, host_b: str, lane_b: int) -> tuple[str, int]:
        """Class and minimal inter-switch hops between NIC ``lane_a`` of ``host_a`` and NIC
        ``lane_b`` of ``host_b`` (e.g. two ranks: local rank = GPU = NIC lane)."""
        classes, hops = self.pair_hops([host_a], [lane_a], [host_b], [lane_b])
        return HOP_CLASSES[int(classes[0])], int(hops[0])

    def pair_hops(self, hosts_a, lanes_a, hosts_b, lanes_b) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`hop_class` over many pairs: (class codes, hop counts)."""
        rows_a = np.array([self.row_of[h] for h in hosts_a], dtype=np.int64)
        rows_b = np.array([self.row_of[h] for h in hosts_b], dtype=np.int64)
        return self.pair_hops_rows(rows_a, lanes_a, rows_b, lanes_b)

    def pair_hops_rows(self, rows_a, lanes_a, rows_b, lanes_b) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pair_hops` for callers that already hold node rows (rank tables)."""
        rows_a, rows_b = np.asarray(rows_a), np.asarray(rows_b)
        switch_a = self.nic_switch[rows_a, np.asarray(lanes_a)]
        switch_b = self.nic_switch[rows_b, np.asarray(lanes_b)]
        hops = self.hops[switch_a, switch_b].astype(np.int64)
        same_node = rows_a == rows_b
        same_switch = switch_a == switch_b
        same_group = self.switch_group[switch_a] == self.switch_group[switch_b]
        classes = np.where(same_node, SAME_NODE, np.where(same_switch, SAME_SWITCH, np.where(same_group, SAME_GROUP, INTER_GROUP)))
        hops = np.where(same_node, 0, hops)
        return classes, hops

    def mean_hops(self, hosts_a, lanes_a, hosts_b, lanes_b, weights=None) -> float:
        """Average minimal hops over explicit pairs, optionally weighted (e.g. by bytes)."""
        _, hops = self.pair_hops(hosts_a, lanes_a, hosts_b, lanes_b)
        if hops.size == 0:
            return 0.0
        return float(np.average(hops, weights=weights))
