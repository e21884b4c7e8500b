"""Catalogue: the coverage check of ``dcgm-device`` over the whole reference system on the embedded store.

The reference system (``import_topology --preset alps``: 2,688 nodes, 10,752 GPUs) and two hours of
fleet telemetry — power and temperature of every GPU once a minute, 2.6 million values, 16 nodes
silent for the last 35 minutes — in a fresh embedded store. Timed:

* the coverage check: reading the source as the checks do (the newest sample of every GPU in the check
  window, and — shared with the gaps and drift checks — per-node bucket counts and a schema sample), the
  expected population from the topology, and the comparison with the missing members grouped by node;
* all four checks of the product as the worker runs them (freshness, coverage, gaps, drift; stored).

The floor is a bare scan of the same window in the same store (count and sum of every column of the
samples the check reads). Target: the coverage check <= 2 s.
"""
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import Figure, median_seconds

MINUTES = 120
SILENT = 16


def run(workdir: Path) -> list[Figure]:
    import duckdb
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    from apps.catalog.models import DataProduct
    from apps.catalog.quality import coverage
    from apps.catalog.services import load_catalog, run_checks
    from apps.catalog.sources import observe, population
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store
    from apps.topology.models import Node

    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(workdir / "catalog-telemetry")}}}
    reset_telemetry_stores()
    if not Node.objects.exists():
        call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    hosts = sorted(Node.objects.exclude(state="down").values_list("hostname", flat=True))
    now = timezone.now().replace(second=0, microsecond=0)
    times = pd.date_range(end=now - timedelta(minutes=1), periods=MINUTES, freq="60s", tz="UTC")
    store = telemetry_store()
    rng = np.random.default_rng(11)
    started = time.perf_counter()
    written = 0
    silent = set(hosts[1000:1000 + SILENT])
    for first in range(0, len(hosts), 256):
        chunk = hosts[first:first + 256]
        host = np.repeat(chunk, 4 * MINUTES)
        gpu = np.tile(np.repeat(np.arange(4), MINUTES), len(chunk))
        ts = np.tile(times, 4 * len(chunk))
        frame = pd.DataFrame({"ts": ts, "cluster": "alps", "host": host, "gpu": gpu, "uuid": ""})
        keep = ~(np.isin(host, list(silent)) & (np.tile(np.arange(MINUTES), 4 * len(chunk)) >= MINUTES - 35))
        frame = frame[keep]
        for field, (mean, spread) in ((155, (400.0, 120.0)), (150, (45.0, 8.0))):
            written += store.write(frame.assign(field=field, value=rng.normal(mean, spread, len(frame))))
    load_time = time.perf_counter() - started
    load_catalog()
    product = DataProduct.objects.get(name="dcgm-device")
    definition = product.definition
    result = {}

    def coverage_check():
        observation = observe(definition, now)
        expected = population("topology_gpus", now=now, window=timedelta(seconds=definition["checks"]["window"]))
        result["coverage"] = coverage(observation.present, expected.members, target=0.995, population="topology_gpus",
                                      expected_per_host=expected.per_host)

    seconds = median_seconds(coverage_check, repeats=5)
    all_checks = median_seconds(lambda: run_checks(product, now=now), repeats=3)
    window = definition["checks"]["window"]
    lo, hi = int((now - timedelta(seconds=window)).timestamp() * 1e9), int(now.timestamp() * 1e9)
    connection = duckdb.connect(str(store.file), read_only=True)

    def bare_scan():
        connection.execute("SELECT count(*), sum(value), sum(ts), sum(series), sum(field) FROM samples "
                           "WHERE ts >= ? AND ts < ? AND field IN (155, 150)", [lo, hi]).fetchall()

    floor = median_seconds(bare_scan, repeats=5)
    values = connection.execute("SELECT count(*) FROM samples WHERE ts >= ? AND ts < ?", [lo, hi]).fetchone()[0]
    connection.close()
    measured = result["coverage"].measured
    found = sorted(group["member"] for group in measured["missing"])
    ok = found == sorted(silent)
    reset_telemetry_stores()
    return [
        Figure(f"coverage check, {measured['expected']:,} GPUs", seconds, floor, f"bare scan of the {values:,} values in the window",
               f"target <= 2 s; {measured['present']:,} present, the {len(silent)} silent nodes found: {'yes' if ok else 'NO'} "
               f"(store filled with {written:,} values in {load_time:.1f} s)"),
        Figure("all four checks of dcgm-device (stored)", all_checks, floor, "the same bare scan",
               "freshness, coverage, gaps (per node, 60 s buckets), schema drift, their history rows and incidents"),
    ]
