"""The synthetic dragonfly generator and the reference preset."""
import pytest

from apps.topology.addresses import decode_ama, parse_node_xname
from apps.topology.generator import ALPS_GH200, DragonflyParameters, ParameterError, generate
from apps.topology.graph import build_graph, switch_graph


def test_reference_preset_has_the_published_size(alps_topology):
    assert alps_topology.counts() == {"groups": 24, "switches": 768, "nodes": 2688, "nics": 10752, "gpus": 10752}


def test_reference_preset_marks_its_assumptions():
    assert {"groups", "nic_cabling", "global_links_per_group_pair", "hostnames"} <= set(ALPS_GH200.assumptions)
    assert all(len(reason) > 20 for reason in ALPS_GH200.assumptions.values())


def test_each_nic_of_a_node_is_on_a_different_switch_and_its_mac_decodes_to_its_position(alps_topology):
    for node in alps_topology.nodes[::97]:
        assert len({(nic.group, nic.switch) for nic in node.nics}) == 4
        for nic in node.nics:
            address = decode_ama(nic.mac)
            assert (address.group, address.switch, address.port) == (nic.group, nic.switch, nic.port)
            assert address.edge_port is not None


def test_nodes_are_cray_ex_xnames_with_two_boards_per_blade(alps_topology):
    first, second = alps_topology.nodes[0], alps_topology.nodes[1]
    assert (first.hostname, first.xname) == ("nid000001", "x1000c0s0b0n0")
    assert (second.hostname, second.xname) == ("nid000002", "x1000c0s0b1n0")
    last = parse_node_xname(alps_topology.nodes[-1].xname)
    assert (last.cabinet, last.chassis, last.slot, last.board, last.node) == (1305, 7, 6, 1, 0)


def test_switches_carry_14_nics_each_and_groups_have_32_switches(alps_topology):
    from collections import Counter

    per_switch = Counter((nic.group, nic.switch) for node in alps_topology.nodes for nic in node.nics)
    assert set(per_switch.values()) == {14}
    assert Counter(switch.group for switch in alps_topology.switches) == {group: 32 for group in range(24)}


def test_every_group_pair_has_its_global_links(alps_topology):
    from collections import Counter

    pairs = Counter((link.group_a, link.group_b) for link in alps_topology.global_links)
    assert len(pairs) == 24 * 23 // 2
    assert set(pairs.values()) == {4}
    ports = Counter()
    for link in alps_topology.global_links:
        ports[(link.group_a, link.switch_a)] += 1
        ports[(link.group_b, link.switch_b)] += 1
    # 23 peers x 4 links = 92 global ports per group, spread over 32 switches: 2 or 3 each.
    assert set(ports.values()) <= {2, 3}


def test_generation_is_deterministic(small_topology):
    from tests.topology.conftest import SMALL

    assert generate(SMALL) == small_topology


def test_impossible_parameters_are_refused_with_every_reason():
    with pytest.raises(ParameterError) as error:
        generate(DragonflyParameters(groups=600, nics_per_node=5, blades_per_chassis=9))
    message = str(error.value)
    assert "512" in message and "nics_per_node (5)" in message and "18 nodes per chassis" in message


def test_graph_links_match_the_model(small_topology):
    graph = build_graph(small_topology)
    kinds = {}
    for _, _, kind in graph.edges(data="kind"):
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {"host": 24 * 2 + 24 * 2, "L0": 48, "affinity": 48, "L1": 3 * 6, "L2": 3}
    fabric = switch_graph(graph)
    assert fabric.number_of_nodes() == 12
    assert graph.edges[("switch", 0, 0), ("switch", 1, 0)]["kind"] == "L2"
    assert graph.edges[("nic", "nid000001", 1), ("switch", 0, 1)]["port"] == 0
