"""Topology: whole-system build, placement of a 1,024-node set, loading the stored system."""
import random
import sqlite3
from pathlib import Path

import numpy as np

from bench.common import Figure, median_seconds


def run(workdir: Path) -> list[Figure]:
    from django.conf import settings

    from apps.topology.generator import ALPS_GH200, generate
    from apps.topology.graph import build_graph
    from apps.topology.placement import TopologyIndex

    def build():
        topology = generate(ALPS_GH200)
        TopologyIndex(topology)
        build_graph(topology)

    build_seconds = median_seconds(build, repeats=5)
    topology = generate(ALPS_GH200)
    counts = topology.counts()

    def bare_build():
        # The same records as plain tuples and the same edge list in a plain list: what any
        # in-memory representation of the system must at least create.
        nodes, edges = [], []
        for g in range(24):
            for n in range(112):
                host = f"nid{g * 112 + n + 1:06d}"
                nodes.append((host, g))
                for i in range(4):
                    edges.append((host, i, g, (n // 14) * 4 + i, n % 14))
                    edges.append((host, i, "gpu"))
                    edges.append((host, i, "affinity"))
        for g in range(24):
            for a in range(32):
                for b in range(a + 1, 32):
                    edges.append((g, a, b))
        return nodes, edges

    bare_seconds = median_seconds(bare_build, repeats=5)

    index = TopologyIndex(topology)
    hostnames = [node.hostname for node in topology.nodes]
    chosen = random.Random(7).sample(hostnames, 1024)
    placement_seconds = median_seconds(lambda: index.placement(chosen), repeats=21)
    rows = index.rows(chosen)

    def bare_scan():
        switches = index.nic_switch[rows].ravel()
        np.unique(switches)
        np.bincount(index.node_group[rows])

    scan_seconds = median_seconds(bare_scan, repeats=21)

    # Loading the stored system, as every web process does once per topology revision.
    from django.core.management import call_command

    from apps.topology import selectors

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))

    def load():
        selectors._cache["revision"] = object()  # force a reload
        selectors.topology_index_current()

    load_seconds = median_seconds(load, repeats=3)
    database = settings.DATABASES["default"]["NAME"]

    def raw_select():
        connection = sqlite3.connect(database)
        connection.execute("SELECT n.hostname, i.idx, i.name, i.mac, i.port FROM topology_nic i JOIN topology_node n ON n.id = i.node_id".replace("i.idx", '"i"."index"')).fetchall()
        connection.execute("SELECT hostname, xname, cabinet, gpus, gpu_model FROM topology_node").fetchall()
        connection.close()

    raw_seconds = median_seconds(raw_select, repeats=3)
    return [
        Figure("topology build, whole system", build_seconds, bare_seconds,
               "the same node/NIC/edge tuples built in plain lists",
               f"{counts['nodes']} nodes, {counts['nics']} NICs, {counts['switches']} switches; target <= 0.5 s"),
        Figure("placement of a 1,024-node set", placement_seconds, scan_seconds,
               "bare numpy scan of the same 4,096 switch ids", "target <= 50 ms"),
        Figure("load stored topology (SQLite) + index", load_seconds, raw_seconds,
               "raw sqlite3 SELECT of the same NIC and node rows"),
    ]
