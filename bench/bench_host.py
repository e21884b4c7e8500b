"""Host fields (issue 39): one 10-s interval of the whole reference system's host side, ingested on one core.

The reference system has 2,688 GH200 nodes. Every 10 s each node's collector sends its host fields
(``apps/telemetry/hostfields.py``) as ``host_metrics`` rows: CPU busy, iowait and steal of the node and of each of its
4 Grace NUMA domains, memory of the node (total, used, page cache, swap used, pages swapped out, PSI pressure) and of
each NUMA domain (total, used, page cache), page cache and host allocations resident in each of its 4 GPUs' memory (and
the GPU memory's size), and the running job step's CPU, rank CPU, data-loader CPU and workers: 50 rows a node,
134,400 rows per interval. One worker core must keep up: reading the NDJSON body, checking every row
(``ingest.parse_batch``: time, host, domain and field through the registry, value) and storing them (``write_net``, the
table host rows share with the NIC counters, DuckDB held to one thread) must take well under the 10 s, sustained over 3
consecutive intervals into the same store. The floor is a bare DuckDB INSERT of the same rows, already in columns, into
a table with no key, measured in the same run.
"""
import json
from datetime import timedelta
from pathlib import Path

import pandas as pd

from bench.common import Figure, ingest_net_bodies

NODES = 2688
INTERVAL_S = 10
T0 = pd.Timestamp("2026-11-21T10:00:00Z")
NODE_ROWS = ([("node", f) for f in ("host_cpu_busy", "host_cpu_iowait", "host_cpu_steal", "host_mem_total", "host_mem_used",
                                    "host_page_cache", "host_swap_used", "host_swap_out_pages", "host_mem_pressure")]
             + [(f"numa{n}", f) for n in range(4) for f in ("host_cpu_busy", "host_cpu_iowait", "host_cpu_steal",
                                                             "host_mem_total", "host_mem_used", "host_page_cache")]
             + [(f"gpu{g}", f) for g in range(4) for f in ("host_mem_total", "host_gpu_page_cache", "host_gpu_host_alloc")]
             + [("job4242.0", f) for f in ("host_job_cpu", "host_job_cpu_seconds", "host_rank_cpu", "host_dataloader_cpu",
                                           "host_dataloader_workers")])


def interval_body(interval: int, nodes: int) -> bytes:
    """The NDJSON of one interval's host rows of every node."""
    ts = (T0 + timedelta(seconds=INTERVAL_S * interval)).isoformat().replace("+00:00", "Z")
    lines = []
    for node in range(nodes):
        host = f"nid{node:06d}"
        for k, (domain, field) in enumerate(NODE_ROWS):
            value = ((node * 31 + k * 7 + interval) % 1000) / 1000.0
            lines.append(json.dumps({"ts": ts, "host": host, "host_metrics": domain, "field": field, "value": value},
                                    separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def measure(workdir: Path, nodes: int = NODES, intervals: int = 3) -> dict:
    from apps.telemetry.backends.embedded import EmbeddedBackend

    bodies = [interval_body(interval, nodes) for interval in range(intervals)]
    store = EmbeddedBackend(path=str(workdir / "host"), threads=1)
    store.check()
    now = (T0 + timedelta(seconds=INTERVAL_S * intervals)).to_pydatetime()
    done = ingest_net_bodies(store, bodies, now, workdir, "host")
    per_interval = done["seconds"]
    stored = len(store.read_host("alps"))
    store.close()
    frame, floor = done["frame"], done["floor"]
    return {"rows": len(frame), "nodes": nodes, "per_node": len(NODE_ROWS), "seconds": per_interval, "floor": floor,
            "stored": stored, "expected": len(frame) * intervals}


def run(workdir: Path) -> list[Figure]:
    report = measure(workdir)
    rate = report["rows"] / report["seconds"]
    return [Figure(f"ingest one 10-s interval of {report['nodes']:,} nodes' host fields (1 core)", report["seconds"],
                   report["floor"], "bare DuckDB INSERT of the same rows, no key",
                   f"{report['rows']:,} rows ({report['per_node']} a node): parse + validate + write, {rate:,.0f} rows/s; "
                   f"{report['stored']:,} stored of {report['expected']:,}; target < {INTERVAL_S} s per interval "
                   f"({100 * report['seconds'] / INTERVAL_S:.0f} % of one core)")]
