"""Telemetry: bulk ingestion into the embedded store, and aggregation of a whole-machine job window.

Ingestion is timed with DuckDB held to one thread (the target is per core) and includes what a
write does: canonical types, in-batch de-duplication, replace-on-key and the rollups. Its floor is
a bare INSERT of the same rows into a table with no key and no rollups.

Aggregation reads a 4,096-GPU x 1,080-sample x 12-field window (3 h at 10 s: 53 million values)
into 10-minute buckets (count, mean, min, max per GPU and field); its floor is a bare scan of the
same samples (count and sum of every column) in the same store.
"""
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import Figure, median_seconds

FIELDS = (1001, 1002, 1003, 1004, 1005, 1009, 1010, 1011, 1012, 100, 150, 155)
T0 = pd.Timestamp("2026-11-21T10:00:00Z")


def samples(first_gpu: int, gpus: int, count: int, every_s: int = 10, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed + first_gpu)
    gpu_ids = np.arange(first_gpu, first_gpu + gpus)
    rows = gpus * count * len(FIELDS)
    hosts = np.array([f"nid{g // 4:06d}" for g in gpu_ids], dtype=object)
    return pd.DataFrame({
        "ts": T0 + pd.to_timedelta(np.tile(np.repeat(np.arange(count) * every_s, len(FIELDS)), gpus), unit="s"),
        "cluster": "alps",
        "host": np.repeat(hosts, count * len(FIELDS)),
        "gpu": np.repeat(gpu_ids % 4, count * len(FIELDS)).astype("int16"),
        "uuid": "",
        "field": np.tile(np.array(FIELDS, dtype="int32"), gpus * count),
        "value": rng.random(rows),
    })


def run(workdir: Path) -> list[Figure]:
    import duckdb

    from apps.telemetry.backends.base import Query
    from apps.telemetry.backends.embedded import EmbeddedBackend

    figures = []

    # -- ingestion, one core ----------------------------------------------------------------------
    batch = samples(0, 512, 60)  # 512 GPUs x 10 minutes at 10 s x 12 fields = 368,640 values
    counter = {"run": 0}

    def fresh_store():
        counter["run"] += 1
        return EmbeddedBackend(path=str(workdir / f"ingest-{counter['run']}"), threads=1)

    stores = {}

    def setup():
        stores["store"] = fresh_store()
        stores["store"].check()

    seconds = median_seconds(lambda: stores["store"].write(batch), repeats=3, setup=setup)
    again = median_seconds(lambda: stores["store"].write(batch), repeats=3)  # same batch: replace, no growth

    def bare_setup():
        stores["bare"] = duckdb.connect(str(workdir / f"bare-{counter['run']}.duckdb"))
        counter["run"] += 1
        stores["bare"].execute("SET threads = 1")
        stores["bare"].execute("CREATE TABLE s (cluster VARCHAR, host VARCHAR, gpu SMALLINT, uuid VARCHAR, field INTEGER, ts BIGINT, value DOUBLE)")
        stores["bare"].register("plain", plain)

    plain = batch.assign(ts=batch["ts"].astype("int64"))[["cluster", "host", "gpu", "uuid", "field", "ts", "value"]]
    floor = median_seconds(lambda: stores["bare"].execute("INSERT INTO s SELECT * FROM plain"), repeats=3, setup=bare_setup)
    for store in (stores.get("store"), stores.get("bare")):
        if hasattr(store, "close"):
            store.close()
    rate = len(batch) / seconds
    figures.append(Figure(f"ingest {len(batch):,} values (1 core)", seconds, floor,
                          "bare INSERT of the same rows, no key, no rollups",
                          f"{rate:,.0f} values/s; re-sending the batch {len(batch) / again:,.0f} values/s; target >= 500,000/s"))

    # -- aggregation of a 4,096-GPU job window ------------------------------------------------------
    store = EmbeddedBackend(path=str(workdir / "job-window"))
    for first in range(0, 4096, 512):
        store.write(samples(first, 512, 1080))
    window = Query(start=T0.to_pydatetime(), end=(T0 + timedelta(hours=3)).to_pydatetime(), cluster="alps")
    result = {}

    def aggregate():
        result["frame"] = store.aggregate(window, 600)

    seconds = median_seconds(aggregate, repeats=5)
    connection = duckdb.connect(str(store.file), read_only=True)
    lo, hi = int(T0.value), int((T0 + timedelta(hours=3)).value)

    def bare_scan():
        connection.execute("""SELECT count(*), sum(value), sum(ts), sum(series), sum(field)
                              FROM samples WHERE ts >= ? AND ts < ?""", [lo, hi]).fetchall()

    floor = median_seconds(bare_scan, repeats=5)
    values = connection.execute("SELECT count(*) FROM samples").fetchone()[0]
    connection.close()
    figures.append(Figure("aggregate 4,096 GPUs x 3 h x 12 fields", seconds, floor,
                          f"bare scan of the same {values:,} values in the store",
                          f"10-minute buckets: {len(result['frame']):,} rows of count/mean/min/max; target <= 0.3 s and <= 3x the scan"))
    return figures
