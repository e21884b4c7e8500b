"""The embedded telemetry store: one DuckDB file, no server.

Layout (all times are integer nanoseconds since the epoch, UTC, so nothing is rounded):

* ``samples`` — the canonical rows. No primary-key index: DuckDB's index makes upserts about six
  times slower than a delete-then-insert limited to the batch's time range, which the column
  statistics (zone maps) on ``ts`` keep cheap. Writing a sample key again replaces its value.
* ``rollup_60``, ``rollup_600``, ``rollup_3600`` — count, sum, min and max per series and
  epoch-aligned bucket, kept up to date on every write from the level below. ``aggregate`` answers
  mean/min/max from the coarsest level that divides the step, for the buckets wholly inside the
  window, and from raw samples for the partial buckets at its edges; percentiles always come from
  raw samples. A job's whole window at 10-minute buckets is then a scan of a few hundred thousand
  rows instead of tens of millions.

DuckDB lets one process at a time open a file for writing, and web workers, Celery workers and
commands all use the store, so every operation opens the file, works in one transaction and closes
it; a process that finds the file locked retries with backoff for ``lock_timeout`` seconds and then
raises TelemetryUnavailable naming the file. Plain Python: no Django.
"""
from __future__ import annotations

import random
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from .base import (
    COLUMNS, DEFAULT_STATS, PERCENTILES, Query, TelemetryBackend, TelemetryUnavailable, canonical, check_stats,
    deduplicate, step_seconds,
)

NS = 1_000_000_000
ROLLUP_LEVELS = (60, 600, 3600)  # seconds; each level is built from the one before

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS samples (
        cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, gpu SMALLINT NOT NULL, uuid VARCHAR NOT NULL,
        field INTEGER NOT NULL, ts BIGINT NOT NULL, value DOUBLE NOT NULL)""",
    *[f"""CREATE TABLE IF NOT EXISTS rollup_{level} (
        cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, gpu SMALLINT NOT NULL, field INTEGER NOT NULL,
        bucket BIGINT NOT NULL, n BIGINT NOT NULL, total DOUBLE NOT NULL, lo DOUBLE NOT NULL, hi DOUBLE NOT NULL)"""
      for level in ROLLUP_LEVELS],
    "CREATE TABLE IF NOT EXISTS store_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
]
SCHEMA_VERSION = "1"
_SERIES = ("cluster", "host", "gpu", "field")


class EmbeddedBackend(TelemetryBackend):
    name = "embedded telemetry store"
    percentiles_exact = True

    def __init__(self, path: str, lock_timeout: float = 30.0, threads: int | None = None, **options):
        super().__init__(path=path, lock_timeout=lock_timeout, threads=threads, **options)
        if not path:
            raise TelemetryUnavailable("the embedded telemetry store needs a path (TELEMETRY_BACKENDS OPTIONS 'path')")
        folder = Path(path)
        self.file = folder / "telemetry.duckdb" if folder.suffix != ".duckdb" else folder
        self.lock_timeout = float(lock_timeout)
        self.threads = threads
        self._local = threading.Lock()  # one operation at a time per process; DuckDB's file lock does the rest
        self._ready = False

    # -- connections ---------------------------------------------------------------------------

    @contextmanager
    def _connect(self):
        import duckdb

        deadline = time.monotonic() + self.lock_timeout
        delay = 0.02
        with self._local:
            while True:
                try:
                    self.file.parent.mkdir(parents=True, exist_ok=True)
                    connection = duckdb.connect(str(self.file))
                    break
                except duckdb.IOException as exc:
                    if "lock" not in str(exc).lower():
                        raise TelemetryUnavailable(f"{self.name} {self.file}: {exc}") from exc
                    if time.monotonic() > deadline:
                        raise TelemetryUnavailable(
                            f"{self.name} {self.file} stayed locked by another process for {self.lock_timeout:.0f} s; "
                            "is a long import running? Try again shortly.") from exc
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 2, 0.5)
                except OSError as exc:
                    raise TelemetryUnavailable(f"{self.name} {self.file}: {exc.strerror or exc}") from exc
            try:
                connection.execute("SET enable_progress_bar = false")
                if self.threads:
                    connection.execute(f"SET threads = {int(self.threads)}")
                if not self._ready:
                    for statement in _SCHEMA:
                        connection.execute(statement)
                    connection.execute("INSERT OR REPLACE INTO store_info VALUES ('schema', ?)", [SCHEMA_VERSION])
                    self._ready = True
                yield connection
            finally:
                connection.close()

    # -- writing -------------------------------------------------------------------------------

    def write(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate(canonical(frame))
        rows = pd.DataFrame({
            "cluster": batch["cluster"].to_numpy(object), "host": batch["host"].to_numpy(object),
            "gpu": batch["gpu"].to_numpy(), "uuid": batch["uuid"].to_numpy(object), "field": batch["field"].to_numpy(),
            "ts": batch["ts"].astype("int64").to_numpy(), "value": batch["value"].to_numpy(),
        })
        with self._connect() as db:
            db.register("batch", rows)
            lo, hi = int(rows["ts"].min()), int(rows["ts"].max())
            db.execute("BEGIN TRANSACTION")
            try:
                overlaps = db.execute("SELECT 1 FROM samples WHERE ts BETWEEN ? AND ? LIMIT 1", [lo, hi]).fetchone()
                if overlaps:  # new data (the common case) skips the join
                    db.execute("""DELETE FROM samples USING batch
                                  WHERE samples.ts BETWEEN ? AND ? AND samples.ts = batch.ts AND samples.field = batch.field
                                    AND samples.gpu = batch.gpu AND samples.host = batch.host AND samples.cluster = batch.cluster""",
                               [lo, hi])
                db.execute("INSERT INTO samples SELECT cluster, host, gpu, uuid, field, ts, value FROM batch")
                self._refresh_rollups(db, "batch")
                db.execute("COMMIT")
            except Exception:
                db.execute("ROLLBACK")
                raise
            finally:
                db.unregister("batch")
        return len(rows)

    def _refresh_rollups(self, db, changed: str) -> None:
        """Recompute the rollup buckets that ``changed`` (a relation with the series columns and
        ``ts``) touches, level by level: every bucket of the touched series between the first and
        the last changed sample, from the level below."""
        lo_ts, hi_ts = db.execute(f"SELECT min(ts), max(ts) FROM {changed}").fetchone()
        if lo_ts is None:
            return
        db.execute(f"CREATE OR REPLACE TEMP TABLE touched_series AS SELECT DISTINCT cluster, host, gpu, field FROM {changed}")
        join = "r.cluster = t.cluster AND r.host = t.host AND r.gpu = t.gpu AND r.field = t.field"
        source, time_column, count, total, low, high = "samples", "ts", "count(*)", "sum(r.value)", "min(r.value)", "max(r.value)"
        for level in ROLLUP_LEVELS:
            width = level * NS
            lo, hi = lo_ts - lo_ts % width, hi_ts - hi_ts % width + width
            db.execute(f"""DELETE FROM rollup_{level} AS r USING touched_series t
                           WHERE r.bucket >= ? AND r.bucket < ? AND {join}""", [lo, hi])
            db.execute(f"""INSERT INTO rollup_{level}
                           SELECT r.cluster, r.host, r.gpu, r.field, r.{time_column} - (r.{time_column} % {width}) AS bucket,
                                  {count}, {total}, {low}, {high}
                           FROM {source} r SEMI JOIN touched_series t ON {join}
                           WHERE r.{time_column} >= ? AND r.{time_column} < ?
                           GROUP BY ALL""", [lo, hi])
            source, time_column = f"rollup_{level}", "bucket"
            count, total, low, high = "sum(r.n)", "sum(r.total)", "min(r.lo)", "max(r.hi)"

    # -- reading -------------------------------------------------------------------------------

    @staticmethod
    def _where(query: Query, ts_column: str = "ts", lo: int | None = None, hi: int | None = None) -> tuple[str, list]:
        clauses = [f"{ts_column} >= ?", f"{ts_column} < ?"]
        params: list = [_ns(query.start) if lo is None else lo, _ns(query.end) if hi is None else hi]
        if query.cluster is not None:
            clauses.append("cluster = ?")
            params.append(query.cluster)
        for column, values in (("host", query.hosts), ("gpu", query.gpus), ("field", query.fields)):
            if values is not None:
                clauses.append(f"list_contains(?, {column})")
                params.append([int(v) for v in values] if column != "host" else [str(v) for v in values])
        return " AND ".join(clauses), params

    def read(self, query: Query) -> pd.DataFrame:
        where, params = self._where(query)
        with self._connect() as db:
            out = db.execute(f"""SELECT ts, cluster, host, gpu, uuid, field, value FROM samples WHERE {where}
                                 ORDER BY cluster, host, gpu, field, ts""", params).df()
        return _canonical_types(out)

    def latest(self, query: Query) -> pd.DataFrame:
        where, params = self._where(query)
        with self._connect() as db:
            out = db.execute(f"""SELECT max(ts) AS ts, cluster, host, gpu, arg_max(uuid, ts) AS uuid, field,
                                        arg_max(value, ts) AS value
                                 FROM samples WHERE {where} GROUP BY cluster, host, gpu, field
                                 ORDER BY cluster, host, gpu, field""", params).df()
        return _canonical_types(out)

    def aggregate(self, query: Query, step, stats=DEFAULT_STATS) -> pd.DataFrame:
        step = step_seconds(step)
        stats = check_stats(stats)
        width = step * NS
        start, end = _ns(query.start), _ns(query.end)
        level = next((lv for lv in reversed(ROLLUP_LEVELS) if step % lv == 0), None)
        wants_percentiles = any(name in PERCENTILES for name in stats)
        inner_lo = -(-start // width) * width  # first bucket edge inside the window
        inner_hi = end // width * width
        parts = []
        with self._connect() as db:
            if level is None or wants_percentiles or inner_lo >= inner_hi:
                parts.append(self._aggregate_raw(db, query, width, start, end, stats))
            else:
                if start < inner_lo:
                    parts.append(self._aggregate_raw(db, query, width, start, inner_lo, stats))
                parts.append(self._aggregate_rollup(db, query, width, level, inner_lo, inner_hi))
                if inner_hi < end:
                    parts.append(self._aggregate_raw(db, query, width, inner_hi, end, stats))
        out = pd.concat([part for part in parts if len(part)], ignore_index=True) if any(len(p) for p in parts) else parts[0]
        if "mean" in stats:
            out["mean"] = out["total"] / out["count"]
        out["bucket"] = pd.to_datetime(out["bucket"].astype("int64"), utc=True)
        out["gpu"] = out["gpu"].astype("int16")
        out["field"] = out["field"].astype("int32")
        out["count"] = out["count"].astype("int64")
        return out[["bucket", "cluster", "host", "gpu", "field", "count", *stats]]

    def _aggregate_raw(self, db, query, width, lo, hi, stats) -> pd.DataFrame:
        where, params = self._where(query, lo=lo, hi=hi)
        extra = "".join(f", quantile_cont(value, {PERCENTILES[name]}) AS {name}" for name in stats if name in PERCENTILES)
        return db.execute(f"""SELECT ts - (ts % {width}) AS bucket, cluster, host, gpu, field, count(*) AS count,
                                     sum(value) AS total, min(value) AS min, max(value) AS max{extra}
                              FROM samples WHERE {where} GROUP BY ALL""", params).df()

    def _aggregate_rollup(self, db, query, width, level, lo, hi) -> pd.DataFrame:
        where, params = self._where(query, "bucket", lo, hi)
        if width == level * NS:
            sql = f"""SELECT bucket, cluster, host, gpu, field, n AS count, total, lo AS min, hi AS max
                      FROM rollup_{level} WHERE {where}"""
        else:
            sql = f"""SELECT bucket - (bucket % {width}) AS bucket, cluster, host, gpu, field, sum(n) AS count,
                             sum(total) AS total, min(lo) AS min, max(hi) AS max
                      FROM rollup_{level} WHERE {where} GROUP BY ALL"""
        return pd.DataFrame(db.execute(sql, params).fetchnumpy())

    # -- maintenance ---------------------------------------------------------------------------

    def delete(self, query: Query) -> int:
        where, params = self._where(query)
        with self._connect() as db:
            db.execute("BEGIN TRANSACTION")
            try:
                db.execute(f"CREATE OR REPLACE TEMP TABLE deleted AS SELECT cluster, host, gpu, field, ts FROM samples WHERE {where}",
                           params)
                removed = db.execute("SELECT count(*) FROM deleted").fetchone()[0]
                db.execute(f"DELETE FROM samples WHERE {where}", params)
                if removed:
                    self._refresh_rollups(db, "deleted")
                db.execute("COMMIT")
            except Exception:
                db.execute("ROLLBACK")
                raise
        return int(removed)

    def check(self) -> str:
        with self._connect() as db:
            rows = db.execute("SELECT count(*) FROM samples").fetchone()[0]
        size = self.file.stat().st_size if self.file.exists() else 0
        return f"{self.name} {self.file}: {rows:,} samples, {size / 2**20:,.1f} MiB"

    def clear(self) -> None:
        """Remove everything (tests, demo reset)."""
        with self._connect() as db:
            for table in ("samples", *[f"rollup_{level}" for level in ROLLUP_LEVELS]):
                db.execute(f"DELETE FROM {table}")


def _ns(moment) -> int:
    return int(pd.Timestamp(moment).value)


def _canonical_types(frame: pd.DataFrame) -> pd.DataFrame:
    frame["ts"] = pd.to_datetime(frame["ts"].astype("int64"), utc=True)
    frame["gpu"] = frame["gpu"].astype("int16")
    frame["field"] = frame["field"].astype("int32")
    frame["value"] = frame["value"].astype("float64")
    for column in ("cluster", "host", "uuid"):
        frame[column] = frame[column].astype(object)
    return frame[COLUMNS].reset_index(drop=True)

