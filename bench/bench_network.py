"""Network: one second of Slingshot NIC counters for the whole reference system, ingested on one core.

The reference system has 10,752 NICs (2,688 nodes x hsn0..hsn3); each sends the six canonical NIC
counters (netfields.CANONICAL_NIC_FIELDS) once a second, 64,512 rows. One worker core must keep up:
reading the NDJSON body (the collector's format, NIC rows), checking every row
(``ingest.parse_batch``: time, host, nic, field name through the registry, value) and storing the
rows (``write_net`` on the embedded store, DuckDB held to one thread) must take under a second,
sustained: consecutive seconds go into the same store. The floor is a bare DuckDB INSERT of the
same rows, already in columns, into a table with no key, measured in the same run.
"""
import json
from datetime import timedelta
from pathlib import Path

import pandas as pd

from bench.common import Figure, ingest_net_bodies

NODES = 2688
NICS_PER_NODE = 4
T0 = pd.Timestamp("2026-11-21T10:00:00Z")


def second_body(second: int, nics: int, fields) -> bytes:
    """The NDJSON of one second's NIC rows (cumulative counters growing with the second)."""
    ts = (T0 + timedelta(seconds=second)).isoformat().replace("+00:00", "Z")
    lines = []
    for nic in range(nics):
        host, iface = f"nid{nic // NICS_PER_NODE:06d}", f"hsn{nic % NICS_PER_NODE}"
        for k, field in enumerate(fields):
            value = (nic + 1) * 1_000_003 * (second + 1) + k
            lines.append(json.dumps({"ts": ts, "host": host, "nic": iface, "field": field, "value": value},
                                    separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def measure(workdir: Path, nics: int = NODES * NICS_PER_NODE, seconds: int = 3) -> dict:
    """Ingest ``seconds`` consecutive seconds of ``nics`` NICs x the six fields; the median second, the
    floor, and what was stored."""
    from apps.telemetry.backends.embedded import EmbeddedBackend
    from apps.telemetry.netfields import CANONICAL_NIC_FIELDS

    fields = CANONICAL_NIC_FIELDS
    bodies = [second_body(second, nics, fields) for second in range(seconds)]
    store = EmbeddedBackend(path=str(workdir / "network"), threads=1)
    store.check()
    now = (T0 + timedelta(seconds=seconds)).to_pydatetime()
    done = ingest_net_bodies(store, bodies, now, workdir, "network")
    per_second = done["seconds"]
    stored = len(store.read_net("alps"))
    store.close()
    frame, floor = done["frame"], done["floor"]
    return {"rows": len(frame), "nics": nics, "fields": len(fields), "seconds": per_second, "floor": floor,
            "stored": stored, "expected": len(frame) * seconds}


def run(workdir: Path) -> list[Figure]:
    report = measure(workdir)
    rate = report["rows"] / report["seconds"]
    return [Figure(f"ingest 1 s of {report['nics']:,} NICs x {report['fields']} counters (1 core)", report["seconds"],
                   report["floor"], "bare DuckDB INSERT of the same rows, no key",
                   f"{report['rows']:,} rows: parse + validate + write_net, {rate:,.0f} rows/s; "
                   f"{report['stored']:,} stored of {report['expected']:,}; target < 1 s per second")]
