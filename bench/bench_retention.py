"""Retention and scale on one machine (issue 40): the reference system's GPU and NIC telemetry ingested at its real
rate, the store's size per GPU-day and tier, a 30-day read, and the retention pass over a year of rollups.

Four parts, each with a floor measured in the same run; sizes through ``BENCH_RETENTION_*`` (below), the defaults
are the whole reference machine (10,752 GH200 GPUs on 2,688 nodes, 10,752 NICs):

1. **Real-rate ingest.** For ``BENCH_RETENTION_MINUTES`` (30) minutes, every 10 s, one interval of every GPU's 18
   DCGM fields (``synthetic_jobs.job_chunks``: a quarter of the nodes each in a Megatron, memory-bound, idle-GPU and
   communication-heavy job, so the values compress as real ones) and every NIC's six counters goes through the
   store's ``write`` and ``write_net`` (DuckDB held to one thread) — the path the ingestion service takes after
   parsing; parsing is measured by ``bench_telemetry``/``bench_network``/``bench_host``. The rest of the interval
   sleeps. Figure: the process CPU time spent in the two calls over the wall time of the run, as a share of one core
   (target <= 50 %), and the worst interval. Floor: a bare DuckDB ``INSERT`` of the same rows into plain tables (one
   thread), timed in the sleep of every ``FLOOR_EVERY``-th interval.
2. **Size per GPU-day.** Each kind of partition the ingest wrote, copied as it is into a fresh DuckDB file and
   checkpointed: the file's used blocks (``pragma_database_size``, 256 KiB blocks, less the empty file's) over its
   rows gives bytes per row, times the rows a GPU (a NIC) makes in a day in that tier. Beside it the live store's
   own used bytes (which carry the rollups rewritten on every write). The whole machine's footprint at the default
   retention (raw 30 d, 1-min 90 d, 10-min and 1-h 365 d) follows.
3. **A 30-day read.** A month is too much to write through ``write`` on this machine (60 billion raw values), so
   its tiers are written directly in the store's own layout: one ``rollup_3600_YYYYMMDD`` table per day with a row
   (series, field, bucket, n, total, lo, hi) per GPU, field and hour for ``BENCH_RETENTION_QUERY_GPUS`` GPUs x 18
   fields, their ``series`` rows, and ``app_series`` rows for 16 campaigns of 120 chained 6-h allocations, four
   series each at 10 s, time-major as they arrive. The clock is set at the month's end (hour-aligned, so the read
   needs no raw edges). Timed: ``aggregate(Query(now - 30 d, now, fields=(1002,)), 3600)`` (the system's SM
   activity over the month, hourly) and the campaign's curves (``read_job_series`` of its 120 allocations, four
   names). Targets <= 1 s. Floors: the same rows fetched bare into numpy with one SQL statement.
4. **The retention pass.** A store with a year of day partitions, written directly: 365 days of ``rollup_600`` and
   ``rollup_3600``, 90 of ``rollup_60``, 30 of ``samples``, each day sized for ``BENCH_RETENTION_EXPIRE_GPUS`` GPUs
   (two sizes: the pass's cost is the number of partitions, not their rows); the clock two years later, so all of
   it expires. Timed: ``expire(dry_run=True)`` and ``expire()`` (target <= 10 s). Floor: a bare ``DROP TABLE`` of
   each table of a copy of the same file in one connection, then ``CHECKPOINT``.

CPU figures are ``time.process_time`` (every thread of the process); the machine's load average is in each note.
Alone: ``python bench/run.py bench_retention``. ``BENCH_RETENTION_PARTS=ingest,size,query,expire`` picks parts.
"""
from __future__ import annotations

import os
import re
import shutil
import time
import uuid as uuidlib
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import Figure

MACHINE_GPUS = 10_752
GPUS_PER_NODE = 4
FIELDS = 18  # synthetic_jobs.FIELDS
NIC_FIELDS = 6
FLOOR_EVERY = 18  # the floor's sample: one interval in 18 (every 3 minutes at 10 s)
T0 = pd.Timestamp("2026-11-21T10:00:00Z")
DAY_S = 86_400
NS = 1_000_000_000
# rows a series-field makes in a day in each kind (10-s samples)
ROWS_PER_DAY = {"samples": 8640, "rollup_60": 1440, "rollup_600": 144, "rollup_3600": 24,
                "net_samples": 8640, "net_rollup_60": 1440, "net_rollup_600": 144}
RETENTION_DAYS = {"samples": 30, "rollup_60": 90, "rollup_600": 365, "rollup_3600": 365,
                  "net_samples": 30, "net_rollup_60": 90, "net_rollup_600": 365}
APP_NAMES = ("loss", "tokens_per_s", "grad_norm", "iteration")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}/{fifteen:.2f}"


def _hosts(gpus: int) -> list[str]:
    return [f"nid{n:06d}" for n in range(-(-gpus // GPUS_PER_NODE))]


# -- 1. real-rate ingest -----------------------------------------------------------------------------------------------

def _machine_cube(hosts: list[str], intervals: int, interval_s: float):
    """Values (intervals, gpus*fields) of the synthetic jobs, and the interval frames' fixed columns."""
    from apps.telemetry import synthetic_jobs

    profiles = ("megatron", "memory_bound", "idle_gpus", "comm_heavy")
    quarter = -(-len(hosts) // len(profiles))
    blocks, fixed = [], {"host": [], "gpu": [], "uuid": [], "field": []}
    for k, profile in enumerate(profiles):
        part = hosts[k * quarter:(k + 1) * quarter]
        if not part:
            continue
        for frame in synthetic_jobs.job_chunks(profile, part, T0.to_pydatetime(), intervals * interval_s,
                                               interval_s=interval_s, seed=k, hosts_per_chunk=64):
            # rows are (gpu, field, t): keep t as the first axis
            g_f = len(frame) // intervals
            blocks.append(frame["value"].to_numpy().reshape(g_f, intervals).T)
            one = frame.iloc[::intervals]
            for column in fixed:
                fixed[column].append(one[column].to_numpy())
    cube = np.ascontiguousarray(np.concatenate(blocks, axis=1))
    return cube, {column: np.concatenate(parts) for column, parts in fixed.items()}


def _nic_frame(hosts: list[str], nics: int, ts, interval: int) -> pd.DataFrame:
    from apps.telemetry.netfields import CANONICAL_NIC_FIELDS

    nic_ids = np.arange(nics)
    host = np.asarray(hosts, dtype=object)[nic_ids // GPUS_PER_NODE]
    iface = np.array([f"hsn{i}" for i in range(GPUS_PER_NODE)], dtype=object)[nic_ids % GPUS_PER_NODE]
    fields = np.asarray(CANONICAL_NIC_FIELDS, dtype=object)
    rates = np.array([2.0e10, 2.0e10, 4.0e6, 4.0e6, 3.0, 0.0])  # per 10 s: bytes, packets, retries, link downs
    values = np.floor((nic_ids[:, None] % 97 + 1) / 97 * rates[None, :] * (interval + 1))
    return pd.DataFrame({"ts": ts, "cluster": "alps", "host": np.repeat(host, len(fields)),
                         "nic": np.repeat(iface, len(fields)), "field": np.tile(fields, nics),
                         "value": values.reshape(-1)})


def ingest(workdir: Path, minutes: float = 30, interval_s: float = 10.0, gpus: int = MACHINE_GPUS,
           nics: int | None = None, floor_every: int = FLOOR_EVERY, realtime: bool = True, say=print) -> dict:
    """Write ``minutes`` of ``gpus`` GPUs' and ``nics`` NICs' telemetry at the real rate (``realtime=False``: one
    interval after the other, for profiling); CPU per interval."""
    import duckdb

    from apps.telemetry.backends.embedded import EmbeddedBackend

    nics = gpus if nics is None else nics
    intervals = max(1, int(round(minutes * 60 / interval_s)))
    hosts = _hosts(max(gpus, nics))
    started = time.process_time()
    cube, fixed = _machine_cube(hosts[:-(-gpus // GPUS_PER_NODE)], intervals, interval_s)
    say(f"  retention: generated {cube.size:,} GPU values in {time.process_time() - started:.1f} s CPU ({load()})")
    end = T0 + pd.Timedelta(seconds=intervals * interval_s)
    store = EmbeddedBackend(path=str(workdir / "retention-ingest"), threads=1)
    store.clock = lambda: (end + pd.Timedelta(minutes=1)).to_pydatetime()
    store.check()
    bare = duckdb.connect(str(workdir / "retention-ingest-bare.duckdb"))
    bare.execute("SET threads = 1")
    bare.execute("CREATE TABLE s (cluster VARCHAR, host VARCHAR, gpu SMALLINT, uuid VARCHAR, field INTEGER, ts BIGINT, "
                 "value DOUBLE)")
    bare.execute("CREATE TABLE n (cluster VARCHAR, host VARCHAR, nic VARCHAR, field VARCHAR, ts BIGINT, value DOUBLE)")
    cpu, wall, floor_cpu, late = [], [], [], 0
    load_seen = []
    run_start = time.perf_counter()
    for i in range(intervals):
        tick = run_start + i * interval_s
        ts = T0 + pd.Timedelta(seconds=i * interval_s)
        gpu_frame = pd.DataFrame({"ts": ts, "cluster": "alps", "host": fixed["host"], "gpu": fixed["gpu"],
                                  "uuid": fixed["uuid"], "field": fixed["field"], "value": cube[i]})
        nic_frame = _nic_frame(hosts, nics, ts, i)
        c0, w0 = time.process_time(), time.perf_counter()
        written = store.write(gpu_frame) + store.write_net(nic_frame)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        assert written == len(gpu_frame) + len(nic_frame), (written, len(gpu_frame), len(nic_frame))
        if i % floor_every == 0:
            plain = gpu_frame.assign(ts=np.int64(ts.value))[["cluster", "host", "gpu", "uuid", "field", "ts", "value"]]
            plain_nic = nic_frame.assign(ts=np.int64(ts.value))[["cluster", "host", "nic", "field", "ts", "value"]]
            c0 = time.process_time()
            bare.execute("INSERT INTO s SELECT * FROM plain")
            bare.execute("INSERT INTO n SELECT * FROM plain_nic")
            floor_cpu.append(time.process_time() - c0)
        if i % max(1, intervals // 12) == 0:
            load_seen.append(os.getloadavg()[0])
            say(f"  retention: interval {i + 1}/{intervals}: {cpu[-1]:.2f} s CPU, {wall[-1]:.2f} s wall ({load()})")
        rest = tick + interval_s - time.perf_counter()
        if not realtime:
            continue
        if rest > 0:
            time.sleep(rest)
        else:
            late += 1
    elapsed = time.perf_counter() - run_start
    bare.close()
    # The network rollups are the retention pass's (an hour at a time): their CPU is the ingest's too, counted here.
    c0 = time.process_time()
    hours = store.roll_up_net(store.now() + timedelta(hours=1))
    roll_cpu = time.process_time() - c0
    say(f"  retention: network rollups of {hours} hour(s) by the pass: {roll_cpu:.2f} s CPU ({load()})")
    cpu_a, floor_a = np.array(cpu), np.array(floor_cpu)
    return {"store": store, "intervals": intervals, "interval_s": interval_s, "gpus": gpus, "nics": nics,
            "gpu_rows": gpus * FIELDS, "nic_rows": nics * NIC_FIELDS, "elapsed": elapsed,
            "cpu_total": float(cpu_a.sum() + roll_cpu), "roll_cpu": roll_cpu,
            "share": float((cpu_a.sum() + roll_cpu) / elapsed), "cpu_mean": float(cpu_a.mean()), "cpu_worst": float(cpu_a.max()),
            "worst_at": int(cpu_a.argmax()), "cpu_p50": float(np.median(cpu_a)), "wall_worst": float(max(wall)),
            "cpu_first": float(cpu_a[:max(1, intervals // 10)].mean()), "cpu_last": float(cpu_a[-max(1, intervals // 10):].mean()),
            "floor_mean": float(floor_a.mean()), "floor_samples": len(floor_a), "late": late,
            "load_max": max(load_seen) if load_seen else os.getloadavg()[0], "load": load()}


# -- 2. size per GPU-day -----------------------------------------------------------------------------------------------

def store_size(store, workdir: Path, gpus: int, nics: int) -> dict:
    """Bytes per row of each kind the ingest wrote (a compact copy of its partitions) and per GPU-/NIC-day."""
    import duckdb

    source = duckdb.connect(str(store.file), read_only=True)
    tables = [name for (name,) in source.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'")
              .fetchall()]
    live = source.execute("SELECT used_blocks * block_size FROM pragma_database_size()").fetchone()[0]
    source.close()
    out = {"live_used_bytes": int(live), "file_bytes": store.file.stat().st_size, "kinds": {}}
    w = time.perf_counter()
    out["footprint"] = store.footprint()
    out["footprint_s"] = time.perf_counter() - w
    bare = duckdb.connect(str(store.file), read_only=True)
    w = time.perf_counter()
    bare.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
    bare.execute("SELECT * FROM pragma_database_size()").fetchall()
    out["footprint_floor_s"] = time.perf_counter() - w
    bare.close()
    for kind in ROWS_PER_DAY:
        parts = [t for t in tables if t.startswith(kind + "_") and re.fullmatch(r"\d{8}(?:_\d+d)?|\d{10}", t[len(kind) + 1:])]
        if not parts:
            continue
        path = workdir / f"size-{kind}.duckdb"
        path.unlink(missing_ok=True)
        db = duckdb.connect(str(path))
        db.execute(f"ATTACH '{store.file}' AS src (READ_ONLY)")
        used_sql = "SELECT used_blocks * block_size FROM pragma_database_size() WHERE database_name = current_database()"
        db.execute(f"CREATE TABLE t AS SELECT * FROM src.{parts[0]} LIMIT 0")
        db.execute("CHECKPOINT")
        base = db.execute(used_sql).fetchone()[0]
        for part in parts:
            db.execute(f"INSERT INTO t SELECT * FROM src.{part}")
        db.execute("CHECKPOINT")
        rows = db.execute("SELECT count(*) FROM t").fetchone()[0]
        used = db.execute(used_sql).fetchone()[0]
        db.close()
        per_row = max(used - base, 0) / rows if rows else 0.0
        per_series_day = per_row * ROWS_PER_DAY[kind] * (NIC_FIELDS if kind.startswith("net") else FIELDS)
        out["kinds"][kind] = {"rows": int(rows), "bytes": int(used - base), "per_row": per_row,
                              "per_day": per_series_day, "partitions": len(parts)}
        path.unlink(missing_ok=True)
    machine = 0.0
    for kind, entry in out["kinds"].items():
        # the reference machine has as many NICs as GPUs
        entry["machine_retained"] = entry["per_day"] * MACHINE_GPUS * RETENTION_DAYS[kind]
        machine += entry["machine_retained"]
    out["machine_retained"] = machine
    return out


# -- 3. a 30-day read --------------------------------------------------------------------------------------------------

def _series_rows(gpus: int) -> pd.DataFrame:
    hosts = _hosts(gpus)
    ids = np.arange(gpus)
    host = np.asarray(hosts, dtype=object)[ids // GPUS_PER_NODE]
    return pd.DataFrame({"id": ids.astype("int32"), "cluster": "alps", "host": host,
                         "gpu": (ids % GPUS_PER_NODE).astype("int16"),
                         "uuid": [f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f'alps.{h}.gpu{g}')}" for h, g in
                                  zip(host, ids % GPUS_PER_NODE)]})


def _rollup_insert(table: str, level: int, day: int, series: int, fields: tuple, samples_per_bucket: int) -> str:
    """SQL filling ``table`` with a day of level-``level`` rollups for ``series`` GPUs x ``fields``, time-major."""
    buckets = DAY_S // level
    field_list = "[" + ", ".join(str(f) for f in fields) + "]"
    return f"""INSERT INTO {table}
        SELECT s AS series, {field_list}[f + 1] AS field, ({day} * {DAY_S} + b * {level})::BIGINT * {NS} AS bucket,
               {samples_per_bucket} AS n,
               round(v * {samples_per_bucket}, 3) AS total, round(v * 0.9, 3) AS lo, round(least(v * 1.1, 1.0), 3) AS hi
        FROM (SELECT b, s, f, (hash(b // 6, s, f) % 1000) / 1000.0 AS v
              FROM range({buckets}) t1(b), range({series}) t2(s), range({len(fields)}) t3(f))
        ORDER BY b, s, f"""


def _raw_insert(table: str, day: int, series: int, fields: tuple) -> str:
    field_list = "[" + ", ".join(str(f) for f in fields) + "]"
    return f"""INSERT INTO {table}
        SELECT s AS series, {field_list}[f + 1] AS field, ({day} * {DAY_S} + b * 10)::BIGINT * {NS} AS ts,
               round((hash(b // 30, s, f) % 1000) / 1000.0 + (b % 7) / 1000.0, 3) AS value
        FROM range(8640) t1(b), range({series}) t2(s), range({len(fields)}) t3(f)
        ORDER BY b, s, f"""


def month_query(workdir: Path, gpus: int = MACHINE_GPUS, days: int = 30, chain: int = 120, campaigns: int = 16,
                alloc_hours: float = 6.0, repeats: int = 3, say=print) -> dict:
    """Write a month of hourly rollups and campaign series in the store's layout; time the two reads and floors."""
    import duckdb

    from apps.telemetry import synthetic_jobs
    from apps.telemetry.backends.base import Query
    from apps.telemetry.backends.embedded import EmbeddedBackend
    from apps.telemetry.retention import day_name

    fields = tuple(synthetic_jobs.FIELDS)
    end = T0.floor("D")  # midnight: the month is 30 whole days before it
    first_day = int(end.value // (DAY_S * NS)) - days
    store = EmbeddedBackend(path=str(workdir / "retention-month"))
    store.clock = lambda: end.to_pydatetime()
    store.check()
    c0 = time.process_time()
    w0 = time.perf_counter()
    with store._connect() as db:  # the store's own connection, so the views are rebuilt as the store does
        db.register("series_rows", _series_rows(gpus))
        db.execute("INSERT INTO series SELECT * FROM series_rows")
        db.unregister("series_rows")
        for day in range(first_day, first_day + days):
            table = f"rollup_3600_{day_name(day)}"
            db.execute(f"CREATE TABLE {table} (series INTEGER NOT NULL, field SMALLINT NOT NULL, bucket BIGINT NOT NULL, "
                       "n BIGINT NOT NULL, total DOUBLE NOT NULL, lo DOUBLE NOT NULL, hi DOUBLE NOT NULL)")
            db.execute(_rollup_insert(table, 3600, day, gpus, fields, 360))
        store._replace_view(db, "rollup_3600")
        # campaigns: chains of allocations, four series at 10 s each, arriving time-major
        alloc_s = int(alloc_hours * 3600)
        points = alloc_s // 10
        allocations = min(chain, days * DAY_S // alloc_s)
        names = "[" + ", ".join(f"'{n}'" for n in APP_NAMES) + "]"
        db.execute(f"""INSERT INTO app_series
            SELECT 'alps', 5000000 + c * 1000 + j AS job_id, {names}[k + 1] AS name,
                   ({first_day} * {DAY_S} + j * {alloc_s} + p * 10 + c)::BIGINT * {NS} AS ts, p * 4 AS step,
                   round(CASE k WHEN 0 THEN 3.0 - j / 100.0 WHEN 1 THEN 9.5e5 ELSE (hash(p, c) % 100) END
                         + (hash(c, j, k, p) % 1000) / 1000.0, 4) AS value
            FROM range({campaigns}) t0(c), range({allocations}) t1(j), range({len(APP_NAMES)}) t2(k), range({points}) t3(p)
            ORDER BY ts, job_id, name""")
        rollup_rows = db.execute("SELECT count(*) FROM rollup_3600").fetchone()[0]
        app_rows = db.execute("SELECT count(*) FROM app_series").fetchone()[0]
    say(f"  retention: wrote {rollup_rows:,} hourly rollup rows and {app_rows:,} campaign rows in "
        f"{time.perf_counter() - w0:.0f} s ({time.process_time() - c0:.0f} s CPU, {load()})")

    now = end.to_pydatetime()
    query = Query(start=now - timedelta(days=days), end=now, fields=(1002,))
    result = {}

    def timed(action, n=repeats):
        wall, cpu = [], []
        for _ in range(n):
            c, w = time.process_time(), time.perf_counter()
            result["last"] = action()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
        return float(np.median(wall)), float(np.median(cpu))

    agg_wall, agg_cpu = timed(lambda: store.aggregate(query, 3600))
    frame = result["last"]
    agg_rows = len(frame)
    mean_ok = bool(len(frame) and frame["mean"].between(0, 1.1).all())
    chain_ids = [5000000 + j for j in range(allocations)]
    curves = lambda: [store.read_job_series("alps", job, names=list(APP_NAMES)) for job in chain_ids]  # noqa: E731
    app_wall, app_cpu = timed(curves)
    curve_points = sum(len(f) for f in result["last"])

    bare = duckdb.connect(str(store.file), read_only=True)
    lo, hi = int(pd.Timestamp(query.start).value), int(pd.Timestamp(query.end).value)
    agg_floor, _ = timed(lambda: bare.execute(
        "SELECT bucket, series, field, n, total, lo, hi FROM rollup_3600 WHERE field = 1002 AND bucket >= ? AND bucket < ?",
        [lo, hi]).fetchnumpy())
    scan, _ = timed(lambda: bare.execute("SELECT count(*), sum(total), sum(series), sum(bucket) FROM rollup_3600 "
                                         "WHERE field = 1002 AND bucket >= ? AND bucket < ?", [lo, hi]).fetchall())
    app_floor, _ = timed(lambda: bare.execute(
        "SELECT ts, name, step, value FROM app_series WHERE cluster = 'alps' AND list_contains(?, job_id) "
        "ORDER BY job_id, name, ts", [chain_ids]).fetchnumpy())
    bare.close()
    return {"gpus": gpus, "days": days, "rollup_rows": int(rollup_rows), "app_rows": int(app_rows),
            "agg_wall": agg_wall, "agg_cpu": agg_cpu, "agg_rows": agg_rows, "agg_floor": agg_floor, "agg_scan": scan,
            "mean_ok": mean_ok, "app_wall": app_wall, "app_cpu": app_cpu, "app_floor": app_floor,
            "allocations": allocations, "curve_points": curve_points, "load": load(),
            "expected_agg_rows": gpus * days * 24, "expected_points": allocations * len(APP_NAMES) * points}


# -- 4. the retention pass ---------------------------------------------------------------------------------------------

def retention_pass(workdir: Path, gpus: int, days: dict | None = None, tag: str = "", say=print) -> dict:
    """A year of day partitions for ``gpus`` GPUs x 18 fields; time expire() two years later, and the bare drops."""
    import duckdb

    from apps.telemetry import synthetic_jobs
    from apps.telemetry.backends.embedded import EmbeddedBackend
    from apps.telemetry.retention import day_name

    days = days or {"samples": 30, "rollup_60": 90, "rollup_600": 365, "rollup_3600": 365}
    fields = tuple(synthetic_jobs.FIELDS)
    end_day = int(T0.value // (DAY_S * NS))
    store = EmbeddedBackend(path=str(workdir / f"retention-year{tag}"))
    store.check()
    c0, w0 = time.process_time(), time.perf_counter()
    with store._connect() as db:
        from apps.telemetry.backends.embedded import _KIND_COLUMNS

        for kind, count in days.items():
            for day in range(end_day - count, end_day):
                table = f"{kind}_{day_name(day)}"
                db.execute(f"CREATE TABLE {table} ({_KIND_COLUMNS[kind]})")
                if kind == "samples":
                    db.execute(_raw_insert(table, day, gpus, fields))
                else:
                    level = int(kind.split("_")[1])
                    db.execute(_rollup_insert(table, level, day, gpus, fields, level // 10))
            store._replace_view(db, kind)
        rows = {kind: db.execute(f"SELECT count(*) FROM {kind}").fetchone()[0] for kind in days}
        db.execute("CHECKPOINT")
    partitions = sum(days.values())
    say(f"  retention: {partitions} partitions of {gpus} GPUs ({sum(rows.values()):,} rows) written in "
        f"{time.perf_counter() - w0:.0f} s ({time.process_time() - c0:.0f} s CPU, {load()})")
    copy = workdir / f"retention-year{tag}-bare.duckdb"
    shutil.copyfile(store.file, copy)
    file_bytes = store.file.stat().st_size
    later = (T0 + pd.Timedelta(days=730)).to_pydatetime()
    store.clock = lambda: later

    c, w = time.process_time(), time.perf_counter()
    planned = store.expire(dry_run=True)
    dry_wall, dry_cpu = time.perf_counter() - w, time.process_time() - c
    c, w = time.process_time(), time.perf_counter()
    dropped = store.expire()
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    left = store.footprint()
    remaining = sum(v["partitions"] for k, v in left.items() if isinstance(v, dict))

    bare = duckdb.connect(str(copy))
    tables = [name for (name,) in bare.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                               "AND regexp_matches(table_name, '_[0-9]{8}$')").fetchall()]
    c, w = time.process_time(), time.perf_counter()
    for table in tables:
        bare.execute(f"DROP TABLE {table}")
    bare.execute("CHECKPOINT")
    floor_wall, floor_cpu = time.perf_counter() - w, time.process_time() - c
    bare.close()
    copy.unlink(missing_ok=True)
    return {"gpus": gpus, "partitions": partitions, "rows": int(sum(rows.values())), "rows_by_kind": rows,
            "file_bytes": file_bytes, "planned": len(planned), "dropped": len(dropped), "remaining": remaining,
            "dry_wall": dry_wall, "dry_cpu": dry_cpu, "wall": wall, "cpu": cpu, "floor_wall": floor_wall,
            "floor_cpu": floor_cpu, "floor_tables": len(tables), "file_after": left.get("file_bytes"),
            "used_after": left.get("used_bytes"), "load": load()}


# -- the figures -------------------------------------------------------------------------------------------------------

def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB" if n < 1e12 else f"{n / 1e12:,.2f} TB"


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def run(workdir: Path) -> list[Figure]:
    parts = set(os.environ.get("BENCH_RETENTION_PARTS", "ingest,size,query,expire").split(","))
    minutes = float(os.environ.get("BENCH_RETENTION_MINUTES", 30))
    gpus = _env_int("BENCH_RETENTION_GPUS", MACHINE_GPUS)
    query_gpus = _env_int("BENCH_RETENTION_QUERY_GPUS", MACHINE_GPUS)
    expire_sizes = [int(x) for x in os.environ.get("BENCH_RETENTION_EXPIRE_GPUS", "4,32").split(",") if x]
    say = lambda line: print(line, flush=True)  # noqa: E731
    figures = []
    if parts & {"ingest", "size"}:
        report = ingest(workdir, minutes=minutes, gpus=gpus, say=say)
        say(f"  retention: ingest {report}")
        figures.extend(ingest_figures(report))
        if "size" in parts:
            size = store_size(report["store"], workdir, report["gpus"], report["nics"])
            say(f"  retention: size {size}")
            figures.append(size_figure(size, report))
    if "query" in parts:
        month = month_query(workdir, gpus=query_gpus, say=say)
        say(f"  retention: month {month}")
        figures.extend(month_figures(month))
    if "expire" in parts:
        passes = [retention_pass(workdir, size, tag=f"-{size}", say=say) for size in expire_sizes]
        for one in passes:
            say(f"  retention: expire {one}")
        figures.extend(expire_figures(passes))
    return figures


def ingest_figures(r: dict) -> list[Figure]:
    values = r["gpu_rows"] + r["nic_rows"]
    return [Figure(f"ingest {r['gpus']:,} GPUs + {r['nics']:,} NICs at {r['interval_s']:.0f} s, {r['elapsed'] / 60:.0f} min (CPU/interval)",
                   r["cpu_mean"], r["floor_mean"], f"bare DuckDB INSERT of the same rows ({r['floor_samples']} intervals)",
                   f"{r['share'] * 100:.1f} % of one core (write + write_net, 1 DuckDB thread; target <= 50 %); "
                   f"{values:,} rows per {r['interval_s']:.0f} s; median {r['cpu_p50']:.2f} s, worst interval "
                   f"{r['cpu_worst']:.2f} s CPU (#{r['worst_at'] + 1}, {r['wall_worst']:.2f} s wall max); first tenth "
                   f"{r['cpu_first']:.2f} s, last tenth {r['cpu_last']:.2f} s; {r['late']} of {r['intervals']} intervals "
                   f"overran; floor {r['floor_mean'] / r['interval_s'] * 100:.1f} % of one core; {r['load']} "
                   f"(max 1-min {r['load_max']:.2f})")]


def size_figure(s: dict, r: dict) -> Figure:
    k = s["kinds"]
    words = {"samples": "raw", "rollup_60": "1-min", "rollup_600": "10-min", "rollup_3600": "1-h",
             "net_samples": "NIC raw", "net_rollup_60": "NIC 1-min", "net_rollup_600": "NIC 10-min"}
    per_day = "; ".join(f"{words[kind]} {e['per_row']:.2f} B/row = {e['per_day'] / 1e3:,.1f} kB/"
                        f"{'NIC' if kind.startswith('net') else 'GPU'}-day" for kind, e in k.items())
    ingest_hours = r["elapsed"] / 3600
    live_per_gpu_day = s["live_used_bytes"] / r["gpus"] / ingest_hours * 24
    raw = k.get("samples", {}).get("per_row", 0.0) * k.get("samples", {}).get("rows", 0)
    return Figure("store size per GPU-day by tier (timed: footprint())", s["footprint_s"], s["footprint_floor_s"],
                  "bare duckdb_tables() + pragma_database_size()", f"bytes/row of a compact copy of each kind: {per_day}; whole machine at 30/90/365 d: "
                  f"{_mb(s['machine_retained'])}; the live file after the ingest: {_mb(s['live_used_bytes'])} used "
                  f"({_mb(live_per_gpu_day)} per GPU-day with NICs and every tier; compact raw part {_mb(raw)})")


def month_figures(m: dict) -> list[Figure]:
    return [
        Figure(f"30-day hourly SM activity, {m['gpus']:,} GPUs (aggregate)", m["agg_wall"], m["agg_floor"],
               "the same rows fetched bare (one SQL, numpy)",
               f"{m['agg_rows']:,} buckets of {m['expected_agg_rows']:,} from {m['rollup_rows']:,} hourly rollup rows; "
               f"CPU {m['agg_cpu']:.2f} s; bare count/sum scan {m['agg_scan'] * 1000:.0f} ms; means in [0, 1]: "
               f"{m['mean_ok']}; target <= 1 s; {m['load']}"),
        Figure(f"30-day campaign curves ({m['allocations']} allocations x {len(APP_NAMES)} series)", m["app_wall"],
               m["app_floor"], "the same rows fetched bare (one SQL, numpy)",
               f"{m['curve_points']:,} points of {m['expected_points']:,} from {m['app_rows']:,} app_series rows; "
               f"CPU {m['app_cpu']:.2f} s; target <= 1 s; {m['load']}"),
    ]


def expire_figures(passes: list[dict]) -> list[Figure]:
    out = []
    for p in passes:
        out.append(Figure(f"retention pass: {p['partitions']} day partitions of {p['gpus']} GPUs", p["wall"],
                          p["floor_wall"], f"bare DROP TABLE of the same {p['floor_tables']} tables + CHECKPOINT",
                          f"{p['rows']:,} rows, {_mb(p['file_bytes'])} file; dropped {p['dropped']} of {p['planned']} "
                          f"planned, {p['remaining']} left; CPU {p['cpu']:.2f} s (floor {p['floor_cpu']:.2f} s); "
                          f"dry run {p['dry_wall'] * 1000:.0f} ms; file after {_mb(p['file_after'] or 0)} "
                          f"({_mb(p['used_after'] or 0)} used); target <= 10 s; {p['load']}"))
    return out


if __name__ == "__main__":
    import sys
    import tempfile

    sys.exit(print(*run(Path(tempfile.mkdtemp(prefix="bench-retention-"))), sep="\n"))
