"""Placement metrics on hand-computed cases (see tests/topology/conftest.py for the small system)."""
import networkx as nx
import pytest

from apps.topology.graph import build_graph, switch_graph
from apps.topology.placement import TopologyIndex, UnknownNodesError


@pytest.fixture(scope="module")
def small(small_topology):
    return TopologyIndex(small_topology)


def test_one_node(small):
    placement = small.placement(["nid000001"])
    assert (placement.nodes, placement.nics, placement.switches, placement.groups, placement.cabinets) == (1, 2, 2, 1, 1)
    assert placement.group_fragmentation == 1.0
    # The node's two NICs sit on two switches, though one switch could hold both (4 NICs per
    # switch): F_S = 2 / ceil(2 / 4) = 2.
    assert placement.switch_fragmentation == 2.0
    assert placement.pairs.pairs == 0 and placement.pairs.mean_hops is None


def test_nodes_on_one_switch(small):
    # nid000001-04 fill chassis 0 of group 0: lane 0 on switch 0.0, lane 1 on switch 0.1.
    placement = small.placement(["nid000001", "nid000002", "nid000003", "nid000004"])
    assert (placement.switches, placement.groups) == (2, 1)
    assert placement.switch_fragmentation == 1.0 and placement.group_fragmentation == 1.0
    assert placement.pairs.pairs == 6 and placement.pairs.nic_pairs == 12
    assert placement.pairs.by_class == {"same node": 0, "same switch": 12, "same group": 0, "inter-group": 0}
    assert placement.pairs.mean_hops == 0.0


def test_nodes_in_two_groups(small):
    # Lane 0: 0.0 and 1.0 share the L2 cable: 1 hop. Lane 1: 0.1 and 1.1 have no cable to each
    # other's group: L1 + L2 + L1 = 3 hops. Mean 2.
    placement = small.placement(["nid000001", "nid000009"])
    assert (placement.groups, placement.switches, placement.cabinets) == (2, 4, 2)
    assert placement.group_fragmentation == 2.0 and placement.switch_fragmentation == 4.0
    assert placement.nodes_per_group == {0: 1, 1: 1}
    assert placement.pairs.by_class["inter-group"] == 2
    assert placement.pairs.mean_hops == 2.0
    # Lane 0 from chassis 1: 0.2 has no cable, but 1.0 has one to group 0: 2 hops; lane 1 still 3.
    assert small.placement(["nid000005", "nid000009"]).pairs.mean_hops == 2.5


def test_hop_class_of_single_pairs(small):
    assert small.hop_class("nid000001", 0, "nid000001", 1) == ("same node", 0)
    assert small.hop_class("nid000001", 0, "nid000002", 0) == ("same switch", 0)
    assert small.hop_class("nid000001", 0, "nid000005", 0) == ("same group", 1)
    assert small.hop_class("nid000001", 0, "nid000009", 0) == ("inter-group", 1)
    assert small.hop_class("nid000001", 1, "nid000009", 1) == ("inter-group", 3)
    assert small.mean_hops(["nid000001", "nid000001"], [0, 1], ["nid000009", "nid000009"], [0, 1]) == 2.0


def test_fragmented_64_node_set_on_the_reference_system(alps_topology):
    index = TopologyIndex(alps_topology)
    hostnames = [node.hostname for node in alps_topology.nodes]
    # The first 8 nodes of each of groups 0-7: all in chassis 0, so lane h of a group uses switch h.
    chosen = [hostname for group in range(8) for hostname in hostnames[112 * group: 112 * group + 8]]
    placement = index.placement(chosen)
    assert (placement.nodes, placement.nics, placement.groups, placement.cabinets) == (64, 256, 8, 8)
    assert placement.group_fragmentation == 8.0  # 8 groups where 1 (112 nodes) would do
    assert placement.switches == 32
    assert placement.switch_fragmentation == round(32 / 19, 4)  # ceil(256 NICs / 14 per switch) = 19
    # Per lane: 8 groups x C(8,2) = 224 same-switch pairs; the other 2016 - 224 cross groups.
    assert placement.pairs.by_class == {"same node": 0, "same switch": 4 * 224, "same group": 0, "inter-group": 4 * 1792}

    # Mean hops against an independent oracle: shortest paths in the switch graph restricted to
    # the two groups concerned (a minimal dragonfly route never visits a third group).
    fabric = switch_graph(build_graph(alps_topology))
    cache = {}

    def minimal(a, b):
        key = (a, b)
        if key not in cache:
            members = [v for v in fabric if v[1] in (a[1], b[1])]
            cache[key] = nx.shortest_path_length(fabric.subgraph(members), a, b)
        return cache[key]

    by_host = {node.hostname: node for node in alps_topology.nodes}
    total = count = 0
    for i, first in enumerate(chosen):
        for second in chosen[i + 1:]:
            for lane in range(4):
                a, b = by_host[first].nics[lane], by_host[second].nics[lane]
                total += 0 if (a.group, a.switch) == (b.group, b.switch) else minimal(("switch", a.group, a.switch), ("switch", b.group, b.switch))
                count += 1
    assert placement.pairs.mean_hops == pytest.approx(total / count, abs=1e-4)


def test_compact_allocation_beats_a_scattered_one(alps_topology):
    index = TopologyIndex(alps_topology)
    hostnames = [node.hostname for node in alps_topology.nodes]
    compact = index.placement(hostnames[:224])  # two whole groups
    scattered = index.placement(hostnames[::12][:224])
    assert compact.group_fragmentation == 1.0 and compact.groups == 2
    assert scattered.group_fragmentation > 5
    assert compact.pairs.mean_hops < scattered.pairs.mean_hops


def test_unknown_and_duplicate_hostnames(small):
    with pytest.raises(UnknownNodesError) as error:
        small.placement(["nid000001", "nid999999", "bogus"])
    assert error.value.hostnames == ["nid999999", "bogus"]
    assert "2 node(s) not in the topology" in str(error.value)
    assert small.placement(["nid000001", "nid000001"]).nodes == 1
