"""Switch ports placed on the dragonfly (peer from the export, else the cabling convention) and the load of
global links per group pair. Plain: no database."""
import pytest

from apps.topology.addresses import EDGE_PORTS
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.link_load import FABRIC_PORTS, LINK_BYTES_PER_S, PortMap, link_load, place_port

SMALL = DragonflyParameters(name="t", groups=4, chassis_per_cabinet=1, switch_blades_per_chassis=4,
                            blades_per_chassis=2, nodes_per_blade=2, nics_per_node=4, global_links_per_group_pair=2,
                            global_ports_per_switch=8)


@pytest.fixture(scope="module")
def topology():
    return generate(SMALL)


@pytest.fixture(scope="module")
def ports(topology):
    return PortMap(topology)


def xname(topology, group, index):
    return next(s.xname for s in topology.switches if (s.group, s.index) == (group, index))


def test_every_cable_gets_one_port_at_each_end(topology, ports):
    assert len(FABRIC_PORTS) == 48 and not set(FABRIC_PORTS) & set(EDGE_PORTS)
    global_places = [place for switch in ports.places.values() for place in switch.values() if place.kind == "global"]
    assert len(global_places) == 2 * sum(link.links for link in topology.global_links)
    for link in topology.global_links:
        a, b = (link.group_a, link.switch_a), (link.group_b, link.switch_b)
        port = ports.port_of(a, b)
        assert place_port(ports, xname(topology, *a), port) == {"kind": "global", "groups": (link.group_a, link.group_b)}
    local = [place for place in ports.places[(0, 0)].values() if place.kind == "local"]
    assert sorted(place.peer for place in local) == [(0, 1), (0, 2), (0, 3)]


def test_edge_ports_peers_and_unknown_switches(topology, ports):
    switch = xname(topology, 1, 2)
    assert place_port(ports, switch, EDGE_PORTS[3]) == {"kind": "edge", "groups": None}
    # the export's peer wins over the convention
    port = ports.port_of((1, 2), (1, 0))
    assert place_port(ports, switch, port)["kind"] == "local"
    assert place_port(ports, switch, port, peer=xname(topology, 3, 1)) == {"kind": "global", "groups": (1, 3)}
    # a port the convention leaves uncabled, said to be global by the export: global, pair unknown
    assert place_port(ports, switch, FABRIC_PORTS[-1], kind="global") == {"kind": "global", "groups": None}
    assert place_port(ports, "x9999c0r0", 20) is None


def test_load_per_group_pair_is_the_busier_direction_over_its_cables(topology, ports):
    links = [link for link in topology.global_links if {link.group_a, link.group_b} == {0, 2}]
    assert len(links) == 2
    rates = []
    for link in links:  # 0 -> 2: 30 GB/s over the two cables; 2 -> 0: only received counters, 5 GB/s
        a, b = (link.group_a, link.switch_a), (link.group_b, link.switch_b)
        rates.append((xname(topology, *a), f"p{ports.port_of(a, b)}", "port_tx_bytes", 15e9))
        rates.append((xname(topology, *a), ports.port_of(a, b), "port_rx_bytes", 2.5e9))
    other = next(link for link in topology.global_links if {link.group_a, link.group_b} == {1, 3})
    a, b = (other.group_a, other.switch_a), (other.group_b, other.switch_b)
    rates.append((xname(topology, *b), f"p{ports.port_of(b, a)}", "port_tx_bytes", 1e9))
    rates.append((xname(topology, 0, 0), f"p{EDGE_PORTS[0]}", "port_tx_bytes", 24e9))  # a NIC port: not a link
    rates.append(("x9999c0r0", "p20", "port_tx_bytes", 1.0))
    load = link_load(ports, rates)
    pair = load.pairs[(0, 2)]
    assert (pair.links, pair.a_to_b, pair.b_to_a) == (2, 30e9, 5e9)
    assert pair.fraction == pytest.approx(30e9 / (2 * LINK_BYTES_PER_S))
    assert load.pairs[(1, 3)].b_to_a == 1e9 and load.pairs[(1, 3)].a_to_b == 0
    assert load.busiest() is pair
    assert load.switches[(links[0].group_a, links[0].switch_a)] == pytest.approx(15e9 / LINK_BYTES_PER_S)
    assert (0, 0) not in load.switches or load.switches[(0, 0)] < 24e9 / LINK_BYTES_PER_S
    assert load.ports_unknown_switch == 1 and load.ports_measured == 3


def test_the_reference_system_cables_fit_its_switches():
    from apps.topology.generator import ALPS_GH200

    alps = generate(ALPS_GH200)
    ports = PortMap(alps)
    assert sum(len(places) for places in ports.places.values()) == len(alps.switches) * 31 + 2 * len(alps.global_links)
    assert all(len(places) <= len(FABRIC_PORTS) for places in ports.places.values())
    assert ports.links_per_pair[(3, 7)] == 4


def test_the_figure_colours_measured_links_and_switches_on_the_physical_range(topology):
    from apps.core.link_colourings import LinkLoads
    from apps.topology.figures import system_figure

    loads = LinkLoads(pairs={(0, 1): 0.83, (1, 2): 0.1, (2, 3): 0.45}, switches={(0, 1): 0.9}, verdict="")
    figure = system_figure(topology, colour_by="overlay", link_loads=loads)
    names = [trace.name for trace in figure.data]
    assert "global links ≥ 80 % (1)" in names and "global links 0-20 % (1)" in names and "global links 40-60 % (1)" in names
    assert names.index("global links ≥ 80 % (1)") > names.index("global links 0-20 % (1)")  # the busiest drawn on top
    hover = next(trace for trace in figure.data if trace.name == "group pair load")
    assert (hover.marker.cmin, hover.marker.cmax) == (0, 100) and list(hover.marker.color) == [10.0, 45.0, 83.0]
    switches = next(trace for trace in figure.data if trace.name.startswith("switches by busiest port"))
    assert list(switches.marker.color) == [90.0]
    assert next(trace for trace in figure.data if trace.name.startswith("switches not measured")).name.endswith(
        f"({len(topology.switches) - 1})")
