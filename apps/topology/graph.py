"""The topology as a networkx graph.

Pure: must not import django.

Vertices are tuples whose first item is the kind: ``("switch", group, index)``,
``("node", hostname)``, ``("nic", hostname, index)``, ``("gpu", hostname, index)``; switches and
nodes carry attributes (group, xname), NICs and GPUs none (their record holds the details, and
10,752 attribute dicts each would double the build time). Edges carry a
``kind``: ``"L0"`` (NIC to switch edge port, with ``port``), ``"L1"`` (switch to switch inside a
group), ``"L2"`` (between groups, with ``links`` = parallel cables), ``"host"`` (node to its NICs
and GPUs) and ``"affinity"`` (GPU i to NIC i, same NUMA domain on GH200).
"""
from itertools import combinations

import networkx as nx

from apps.core.perf import gc_paused

from .model import Topology


def switch_vertex(group: int, index: int) -> tuple:
    return ("switch", group, index)


def build_graph(topology: Topology) -> nx.Graph:
    with gc_paused():
        return _build_graph(topology)


def _build_graph(topology: Topology) -> nx.Graph:
    graph = nx.Graph(name=topology.name)
    switches_by_group: dict[int, list[tuple]] = {}
    switch_vertices = []
    for switch in topology.switches:
        vertex = switch_vertex(switch.group, switch.index)
        switch_vertices.append((vertex, {"kind": "switch", "group": switch.group, "xname": switch.xname}))
        switches_by_group.setdefault(switch.group, []).append(vertex)
    graph.add_nodes_from(switch_vertices)

    vertices, edges = [], []
    for node in topology.nodes:
        host = ("node", node.hostname)
        vertices.append((host, {"kind": "node", "group": node.group, "xname": node.xname}))
        for nic in node.nics:
            nic_vertex = ("nic", node.hostname, nic.index)
            vertices.append(nic_vertex)
            edges.append((host, nic_vertex, {"kind": "host"}))
            edges.append((nic_vertex, switch_vertex(nic.group, nic.switch), {"kind": "L0", "port": nic.port}))
        for index in range(node.gpus):
            gpu_vertex = ("gpu", node.hostname, index)
            vertices.append(gpu_vertex)
            edges.append((host, gpu_vertex, {"kind": "host"}))
            if index < len(node.nics):
                edges.append((gpu_vertex, ("nic", node.hostname, index), {"kind": "affinity"}))
    graph.add_nodes_from(vertices)
    graph.add_edges_from(edges)
    graph.add_edges_from(
        (a, b, {"kind": "L1"}) for members in switches_by_group.values() for a, b in combinations(members, 2)
    )
    for link in topology.global_links:
        a, b = switch_vertex(link.group_a, link.switch_a), switch_vertex(link.group_b, link.switch_b)
        if graph.has_edge(a, b):
            graph.edges[a, b]["links"] += link.links
        else:
            graph.add_edge(a, b, kind="L2", links=link.links)
    return graph


def switch_graph(graph: nx.Graph) -> nx.Graph:
    """Only switches and the L1/L2 links between them: the fabric that routes traffic."""
    switches = [vertex for vertex in graph if vertex[0] == "switch"]
    return graph.subgraph(switches)
