"""The embedded telemetry store: one DuckDB file, no server.

Layout (all times are integer nanoseconds since the epoch, UTC, so nothing is rounded):

* ``series`` — one row per GPU: a small integer id for (cluster, host, gpu) and its UUID. Samples
  and rollups carry only that id, so writes, joins and grouping work on integers instead of host
  names, and answers turn ids back into names with one categorical lookup.
* ``samples`` — (series, field, ts, value). No primary-key index: DuckDB's index makes upserts
  about six times slower than a delete-then-insert limited to the batch's time range, which the
  column statistics (zone maps) on ``ts`` keep cheap. Writing a sample key again replaces its value.
* ``rollup_60``, ``rollup_600``, ``rollup_3600`` — count, sum, min and max per series, field and
  epoch-aligned bucket, recomputed on every write from the level below for the series and time
  range the write touched. ``aggregate`` answers count/mean/min/max from the coarsest level that
  divides the step, for the buckets wholly inside the window, and from raw samples for the partial
  buckets at its edges; percentiles always come from raw samples. A job's whole window at
  10-minute buckets is then a scan of a few hundred thousand rows instead of tens of millions.
* ``app_series`` — job-scoped application series (``base.APP_COLUMNS``): (cluster, job_id, name,
  ts, step, value), step NULL when unknown. Kept apart from ``samples``: no series id, no rollups
  (a job's series are read whole or by window, a few hundred thousand points at most). Writing a
  (cluster, job_id, name, ts) again replaces it: delete-then-insert in one transaction, as samples.
* ``net_samples`` — network samples (``base.NET_COLUMNS``: Slingshot NIC and switch-port counters):
  (cluster, host, nic, field, ts, value), names as text (a whole system is some 10,000 NICs and
  a few thousand switch ports, a dozen fields each: small dictionaries DuckDB compresses well). Kept
  apart from ``samples`` like ``app_series``, no rollups (``aggregate_net`` groups raw rows, with
  ``arg_min``/``arg_max`` on ts for the first and last value of a bucket). Writing a key again
  replaces it: delete-then-insert in one transaction, the delete skipped when the batch's time range
  holds no stored row (new data, the collector's case).

Tables are created with ``CREATE TABLE IF NOT EXISTS`` when a process first opens the file, so a
store written before a table existed gains it; ``SCHEMA_VERSION`` changes only for a layout an
older file cannot grow into by adding tables.

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

import numpy as np
import pandas as pd

from .base import (
    COLUMNS, DEFAULT_STATS, NET_AGGREGATE_COLUMNS, PERCENTILES, Query, TelemetryBackend, TelemetryUnavailable,
    app_frame_from_columns, app_names, app_window, canonical, canonical_app, canonical_net, check_stats,
    deduplicate_app, deduplicate_net, empty_app_frame, empty_frame, empty_net_aggregate, net_filter,
    net_frame_from_columns, net_window, step_seconds, utc_from_ns,
)

NS = 1_000_000_000
ROLLUP_LEVELS = (60, 600, 3600)  # seconds; each level is built from the one before
SCHEMA_VERSION = "2"  # not raised for app_series, net_samples: CREATE TABLE IF NOT EXISTS adds them to a version-2 file

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS store_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS series (
        id INTEGER NOT NULL, cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, gpu SMALLINT NOT NULL, uuid VARCHAR NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS samples (series INTEGER NOT NULL, field SMALLINT NOT NULL, ts BIGINT NOT NULL, value DOUBLE NOT NULL)",
    *[f"""CREATE TABLE IF NOT EXISTS rollup_{level} (
        series INTEGER NOT NULL, field SMALLINT NOT NULL, bucket BIGINT NOT NULL,
        n BIGINT NOT NULL, total DOUBLE NOT NULL, lo DOUBLE NOT NULL, hi DOUBLE NOT NULL)""" for level in ROLLUP_LEVELS],
    """CREATE TABLE IF NOT EXISTS app_series (
        cluster VARCHAR NOT NULL, job_id BIGINT NOT NULL, name VARCHAR NOT NULL, ts BIGINT NOT NULL, step BIGINT,
        value DOUBLE NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS net_samples (
        cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, nic VARCHAR NOT NULL, field VARCHAR NOT NULL,
        ts BIGINT NOT NULL, value DOUBLE NOT NULL)""",
]


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
                    self._prepare(connection)
                yield connection
            finally:
                connection.close()

    def _prepare(self, db) -> None:
        found = None
        try:
            found = db.execute("SELECT value FROM store_info WHERE key = 'schema'").fetchone()
        except Exception:  # noqa: BLE001 - a new file has no store_info yet
            found = None
        if found and found[0] != SCHEMA_VERSION:
            raise TelemetryUnavailable(f"{self.name} {self.file} has layout {found[0]}, this portal writes layout "
                                       f"{SCHEMA_VERSION}; move the file away (it is rebuilt from the collectors and imports)")
        for statement in _SCHEMA:
            db.execute(statement)
        db.execute("INSERT OR REPLACE INTO store_info VALUES ('schema', ?)", [SCHEMA_VERSION])
        self._ready = True

    @staticmethod
    @contextmanager
    def _transaction(db):
        """One transaction on ``db``: committed when the block ends, rolled back when it raises."""
        db.execute("BEGIN TRANSACTION")
        try:
            yield
            db.execute("COMMIT")
        except Exception:
            db.execute("ROLLBACK")
            raise

    # -- series ids ----------------------------------------------------------------------------

    @staticmethod
    def _series_table(db) -> pd.DataFrame:
        return db.execute("SELECT id, cluster, host, gpu, uuid FROM series").df()

    def _series_ids(self, db, batch: pd.DataFrame) -> np.ndarray:
        """The series id of every batch row, adding the GPUs the store has not seen (and newer UUIDs)."""
        cluster_codes, clusters = pd.factorize(batch["cluster"])
        host_codes, hosts = pd.factorize(batch["host"])
        gpus = batch["gpu"].to_numpy().astype(np.int64)
        key = (cluster_codes.astype(np.int64) * len(hosts) + host_codes) * 65536 + gpus
        unique_keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        # the UUID a batch gives last for each GPU wins
        last = len(key) - 1 - np.unique(key[::-1], return_index=True)[1]
        keys = pd.DataFrame({"cluster": np.asarray(clusters, dtype=object)[cluster_codes[first]],
                             "host": np.asarray(hosts, dtype=object)[host_codes[first]],
                             "gpu": gpus[first].astype("int16"), "uuid": batch["uuid"].to_numpy(object)[last]})
        known = self._series_table(db)
        merged = keys.merge(known, on=["cluster", "host", "gpu"], how="left", suffixes=("", "_known"))
        new = merged[merged["id"].isna()]
        if len(new):
            first_id = int(known["id"].max()) + 1 if len(known) else 0
            new = new.assign(id=np.arange(first_id, first_id + len(new)))
            db.register("new_series", new[["id", "cluster", "host", "gpu", "uuid"]])
            db.execute("INSERT INTO series SELECT id, cluster, host, gpu, uuid FROM new_series")
            db.unregister("new_series")
            merged.loc[new.index, "id"] = new["id"]
        changed_uuid = merged[merged["uuid_known"].notna() & (merged["uuid"] != "") & (merged["uuid"] != merged["uuid_known"])]
        for row in changed_uuid.itertuples():
            db.execute("UPDATE series SET uuid = ? WHERE id = ?", [row.uuid, int(row.id)])
        return merged["id"].to_numpy("int64")[inverse].astype("int32")

    def _matching_series(self, db, query: Query) -> np.ndarray | None:
        """Series ids the query's cluster/hosts/gpus select; None when it selects every series."""
        if query.cluster is None and query.hosts is None and query.gpus is None:
            return None
        table = self._series_table(db)
        mask = np.ones(len(table), dtype=bool)
        if query.cluster is not None:
            mask &= (table["cluster"] == query.cluster).to_numpy()
        if query.hosts is not None:
            mask &= table["host"].isin([str(h) for h in query.hosts]).to_numpy()
        if query.gpus is not None:
            mask &= table["gpu"].isin([int(g) for g in query.gpus]).to_numpy()
        return table["id"].to_numpy("int64")[mask]

    def _where(self, db, query: Query, time_column: str, lo: int, hi: int) -> tuple[str, list] | None:
        """SQL filter for the query; None when it can match nothing."""
        clauses, params = [f"{time_column} >= ?", f"{time_column} < ?"], [lo, hi]
        series = self._matching_series(db, query)
        if series is not None:
            if not len(series):
                return None
            clauses.append("list_contains(?, series)")
            params.append([int(s) for s in series])
        if query.fields is not None:
            clauses.append("list_contains(?, field)")
            params.append([int(f) for f in query.fields])
        return " AND ".join(clauses), params

    def _with_names(self, db, frame: pd.DataFrame) -> pd.DataFrame:
        """Replace the ``series`` column by cluster, host, gpu and uuid (categoricals: one lookup each)."""
        table = self._series_table(db).set_index("id")
        codes = table.index.get_indexer(frame["series"].to_numpy())
        out = frame.drop(columns="series")
        for column in ("cluster", "host", "uuid"):
            categories = pd.Index(table[column].unique())
            out[column] = pd.Categorical.from_codes(categories.get_indexer(table[column].to_numpy())[codes], categories)
        out["gpu"] = table["gpu"].to_numpy("int16")[codes]
        return out

    # -- writing -------------------------------------------------------------------------------

    def write(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = canonical(frame)
        with self._connect() as db:
            try:
                with self._transaction(db):
                    rows = _last_per_key(pd.DataFrame({
                        "series": self._series_ids(db, batch), "field": batch["field"].to_numpy("int16"),
                        "ts": batch["ts"].astype("int64").to_numpy(), "value": batch["value"].to_numpy()}))
                    db.register("batch", rows)
                    lo, hi = int(rows["ts"].min()), int(rows["ts"].max())
                    if db.execute("SELECT 1 FROM samples WHERE ts BETWEEN ? AND ? LIMIT 1", [lo, hi]).fetchone():
                        # Only when the batch overlaps stored time: new data (the common case) skips the join.
                        db.execute("""DELETE FROM samples USING batch
                                      WHERE samples.ts BETWEEN ? AND ? AND samples.ts = batch.ts
                                        AND samples.series = batch.series AND samples.field = batch.field""",
                                   [lo, hi])
                    db.execute("INSERT INTO samples SELECT series, field, ts, value FROM batch")
                    self._refresh_rollups(db, "batch")
            finally:
                try:
                    db.unregister("batch")
                except Exception:  # noqa: BLE001 - not registered when the failure came first
                    pass
        return len(rows)

    def _refresh_rollups(self, db, changed: str) -> None:
        """Recompute, level by level, every bucket of the series and fields in ``changed`` (a relation
        with series, field and ts) between its first and last timestamp."""
        lo_ts, hi_ts = db.execute(f"SELECT min(ts), max(ts) FROM {changed}").fetchone()
        if lo_ts is None:
            return
        db.execute(f"CREATE OR REPLACE TEMP TABLE touched AS SELECT DISTINCT series, field FROM {changed}")
        join = "r.series = t.series AND r.field = t.field"
        source, time_column, aggregates = "samples", "ts", "count(*), sum(r.value), min(r.value), max(r.value)"
        for level in ROLLUP_LEVELS:
            width = level * NS
            lo, hi = lo_ts - lo_ts % width, hi_ts - hi_ts % width + width
            db.execute(f"DELETE FROM rollup_{level} AS r USING touched t WHERE r.bucket >= ? AND r.bucket < ? AND {join}",
                       [lo, hi])
            db.execute(f"""INSERT INTO rollup_{level}
                           SELECT r.series, r.field, r.{time_column} - (r.{time_column} % {width}) AS bucket, {aggregates}
                           FROM {source} r SEMI JOIN touched t ON {join}
                           WHERE r.{time_column} >= ? AND r.{time_column} < ?
                           GROUP BY ALL""", [lo, hi])
            source, time_column, aggregates = f"rollup_{level}", "bucket", "sum(r.n), sum(r.total), min(r.lo), max(r.hi)"

    # -- reading -------------------------------------------------------------------------------

    def read(self, query: Query) -> pd.DataFrame:
        with self._connect() as db:
            where = self._where(db, query, "ts", _ns(query.start), _ns(query.end))
            if where is None:
                return empty_frame()
            raw = db.execute(f"SELECT series, field, ts, value FROM samples WHERE {where[0]}", where[1]).df()
            if raw.empty:
                return empty_frame()
            out = self._with_names(db, raw)
        return _canonical_types(out).sort_values(["cluster", "host", "gpu", "field", "ts"], kind="stable", ignore_index=True)

    def latest(self, query: Query) -> pd.DataFrame:
        with self._connect() as db:
            where = self._where(db, query, "ts", _ns(query.start), _ns(query.end))
            if where is None:
                return empty_frame()
            raw = db.execute(f"""SELECT series, field, max(ts) AS ts, arg_max(value, ts) AS value
                                 FROM samples WHERE {where[0]} GROUP BY series, field""", where[1]).df()
            if raw.empty:
                return empty_frame()
            out = self._with_names(db, raw)
        return _canonical_types(out).sort_values(["cluster", "host", "gpu", "field"], kind="stable", ignore_index=True)

    def aggregate(self, query: Query, step, stats=DEFAULT_STATS) -> pd.DataFrame:
        step = step_seconds(step)
        stats = check_stats(stats)
        width = step * NS
        start, end = _ns(query.start), _ns(query.end)
        level = next((lv for lv in reversed(ROLLUP_LEVELS) if step % lv == 0), None)
        wants_percentiles = any(name in PERCENTILES for name in stats)
        inner_lo = -(-start // width) * width  # the first bucket edge inside the window
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
            parts = [part for part in parts if part is not None and len(part)]
            columns = ["bucket", "cluster", "host", "gpu", "field", "count", *stats]
            if not parts:
                out = pd.DataFrame({column: pd.Series(dtype="float64") for column in columns})
                out["bucket"] = pd.Series(dtype="datetime64[ns, UTC]")
                return out
            out = self._with_names(db, pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0])
        if "mean" in stats:
            out["mean"] = out["total"] / out["count"]
        out["bucket"] = utc_from_ns(out["bucket"])
        out["field"] = out["field"].astype("int32")
        out["count"] = out["count"].astype("int64")
        return out[columns]

    def _aggregate_raw(self, db, query, width, lo, hi, stats) -> pd.DataFrame | None:
        where = self._where(db, query, "ts", lo, hi)
        if where is None:
            return None
        extra = "".join(f", quantile_cont(value, {PERCENTILES[name]}) AS {name}" for name in stats if name in PERCENTILES)
        return pd.DataFrame(db.execute(f"""SELECT ts - (ts % {width}) AS bucket, series, field, count(*) AS count,
                                                  sum(value) AS total, min(value) AS min, max(value) AS max{extra}
                                           FROM samples WHERE {where[0]} GROUP BY ALL""", where[1]).fetchnumpy())

    def _aggregate_rollup(self, db, query, width, level, lo, hi) -> pd.DataFrame | None:
        where = self._where(db, query, "bucket", lo, hi)
        if where is None:
            return None
        if width == level * NS:
            sql = f"""SELECT bucket, series, field, n AS count, total, lo AS min, hi AS max
                      FROM rollup_{level} WHERE {where[0]}"""
        else:
            sql = f"""SELECT bucket - (bucket % {width}) AS bucket, series, field, sum(n) AS count,
                             sum(total) AS total, min(lo) AS min, max(hi) AS max
                      FROM rollup_{level} WHERE {where[0]} GROUP BY ALL"""
        return pd.DataFrame(db.execute(sql, where[1]).fetchnumpy())

    # -- maintenance ---------------------------------------------------------------------------

    def delete(self, query: Query) -> int:
        with self._connect() as db:
            where = self._where(db, query, "ts", _ns(query.start), _ns(query.end))
            if where is None:
                return 0
            with self._transaction(db):
                db.execute(f"CREATE OR REPLACE TEMP TABLE deleted AS SELECT series, field, ts FROM samples WHERE {where[0]}",
                           where[1])
                removed = db.execute("SELECT count(*) FROM deleted").fetchone()[0]
                if removed:
                    db.execute(f"DELETE FROM samples WHERE {where[0]}", where[1])
                    self._refresh_rollups(db, "deleted")
        return int(removed)

    def _replace_rows(self, table: str, rows: pd.DataFrame, key: tuple) -> int:
        """Write ``rows`` (the table's columns, in its order) into ``table``, replacing the stored rows with the same
        ``key`` columns and ``ts``: delete-then-insert in one transaction, the delete skipped when the batch's time
        range holds no stored row (new data, the collector's case)."""
        lo, hi = int(rows["ts"].min()), int(rows["ts"].max())
        batch = f"{table}_batch"
        same_key = " AND ".join(f"{table}.{column} = b.{column}" for column in ("ts", *key))
        with self._connect() as db:
            db.register(batch, rows)
            try:
                with self._transaction(db):
                    if db.execute(f"SELECT 1 FROM {table} WHERE ts BETWEEN ? AND ? LIMIT 1", [lo, hi]).fetchone():
                        db.execute(f"DELETE FROM {table} USING {batch} b WHERE {table}.ts BETWEEN ? AND ? AND {same_key}",
                                   [lo, hi])
                    db.execute(f"INSERT INTO {table} SELECT {', '.join(rows.columns)} FROM {batch}")
            finally:
                db.unregister(batch)
        return len(rows)

    def _delete_rows(self, table: str, where: str, params: list) -> int:
        """Delete the rows of ``table`` that match ``where`` in one transaction; how many."""
        with self._connect() as db, self._transaction(db):
            removed = db.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]
            if removed:
                db.execute(f"DELETE FROM {table} WHERE {where}", params)
        return int(removed)

    # -- job series ----------------------------------------------------------------------------

    def write_job_series(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate_app(canonical_app(frame))
        rows = pd.DataFrame({
            "cluster": batch["cluster"].to_numpy(object), "job_id": batch["job_id"].to_numpy("int64"),
            "name": batch["name"].to_numpy(object), "ts": batch["ts"].astype("int64").to_numpy(),
            "step": batch["step"].array, "value": batch["value"].to_numpy("float64")})
        return self._replace_rows("app_series", rows, ("job_id", "cluster", "name"))

    def read_job_series(self, cluster: str, job_id: int, names=None, start=None, end=None) -> pd.DataFrame:
        lo, hi = app_window(start, end)
        names = app_names(names)
        if names is not None and not names:
            return empty_app_frame()
        clauses, params = ["cluster = ?", "job_id = ?"], [str(cluster), int(job_id)]
        if names is not None:
            clauses.append("list_contains(?, name)")
            params.append(list(names))
        _window(clauses, params, lo, hi)
        with self._connect() as db:
            found = db.execute(f"""SELECT ts, cluster, job_id, name, step, value FROM app_series
                                   WHERE {' AND '.join(clauses)} ORDER BY name, ts""", params).fetchnumpy()
        return app_frame_from_columns(found["ts"], found["cluster"], found["job_id"], found["name"], found["step"],
                                      found["value"])

    def delete_job_series(self, cluster: str, job_id: int | None = None) -> int:
        clauses, params = ["cluster = ?"], [str(cluster)]
        if job_id is not None:
            clauses.append("job_id = ?")
            params.append(int(job_id))
        return self._delete_rows("app_series", " AND ".join(clauses), params)

    # -- network samples -----------------------------------------------------------------------

    def write_net(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate_net(canonical_net(frame))
        rows = pd.DataFrame({
            "cluster": batch["cluster"].to_numpy(object), "host": batch["host"].to_numpy(object),
            "nic": batch["nic"].to_numpy(object), "field": batch["field"].to_numpy(object),
            "ts": batch["ts"].astype("int64").to_numpy(), "value": batch["value"].to_numpy("float64")})
        return self._replace_rows("net_samples", rows, ("host", "nic", "field", "cluster"))

    @staticmethod
    def _net_where(cluster, hosts, nics, fields, start, end) -> tuple[str, list] | None:
        """SQL filter of a network read; None when it can match nothing."""
        lo, hi = net_window(start, end)
        clauses, params = ["cluster = ?"], [str(cluster)]
        for column, values in (("host", net_filter(hosts, "hosts")), ("nic", net_filter(nics, "nics")),
                               ("field", net_filter(fields, "fields"))):
            if values is not None:
                if not values:
                    return None
                clauses.append(f"list_contains(?, {column})")
                params.append(list(values))
        _window(clauses, params, lo, hi)
        return " AND ".join(clauses), params

    def read_net(self, cluster: str, hosts=None, nics=None, fields=None, start=None, end=None) -> pd.DataFrame:
        where = self._net_where(cluster, hosts, nics, fields, start, end)
        if where is None:
            return net_frame_from_columns([], [], [], [], [], [])
        with self._connect() as db:
            found = db.execute(f"""SELECT ts, cluster, host, nic, field, value FROM net_samples
                                   WHERE {where[0]} ORDER BY host, nic, field, ts""", where[1]).fetchnumpy()
        return net_frame_from_columns(found["ts"], found["cluster"], found["host"], found["nic"], found["field"],
                                      found["value"])

    def aggregate_net(self, cluster: str, step, hosts=None, nics=None, fields=None, start=None,
                      end=None) -> pd.DataFrame:
        width = step_seconds(step) * NS
        where = self._net_where(cluster, hosts, nics, fields, start, end)
        if where is None:
            return empty_net_aggregate()
        with self._connect() as db:
            found = db.execute(f"""SELECT ts - (ts % {width}) AS bucket, cluster, host, nic, field, count(*) AS count,
                                          arg_min(value, ts) AS first, arg_max(value, ts) AS last,
                                          min(value) AS min, max(value) AS max
                                   FROM net_samples WHERE {where[0]} GROUP BY ALL""", where[1]).fetchnumpy()
        if len(found["bucket"]) == 0:
            return empty_net_aggregate()
        out = pd.DataFrame({name: found[name] for name in NET_AGGREGATE_COLUMNS})
        out["bucket"] = utc_from_ns(out["bucket"])
        for column in ("cluster", "host", "nic", "field"):
            out[column] = out[column].astype(object)
        out["count"] = out["count"].astype("int64")
        for column in ("first", "last", "min", "max"):
            out[column] = out[column].astype("float64")
        return out[NET_AGGREGATE_COLUMNS]

    def delete_net(self, cluster: str, hosts=None) -> int:
        where = self._net_where(cluster, hosts, None, None, None, None)
        if where is None:
            return 0
        return self._delete_rows("net_samples", *where)

    # -- maintenance, continued ----------------------------------------------------------------

    def check(self) -> str:
        with self._connect() as db:
            rows = db.execute("SELECT count(*) FROM samples").fetchone()[0]
        size = self.file.stat().st_size if self.file.exists() else 0
        return f"{self.name} {self.file}: {rows:,} samples, {size / 2**20:,.1f} MiB"

    def clear(self) -> None:
        """Remove everything, job series and network samples included (tests, demo reset)."""
        with self._connect() as db:
            for table in ("samples", "series", *[f"rollup_{level}" for level in ROLLUP_LEVELS], "app_series",
                          "net_samples"):
                db.execute(f"DELETE FROM {table}")


def _last_per_key(rows: pd.DataFrame) -> pd.DataFrame:
    """The batch's own repeats of a (series, field, ts) key: the last one wins."""
    series, fields, ts = rows["series"].to_numpy(), rows["field"].to_numpy(), rows["ts"].to_numpy()
    order = np.lexsort((ts, fields, series))  # stable: repeats stay in batch order
    s, f, t = series[order], fields[order], ts[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (s[1:] != s[:-1]) | (f[1:] != f[:-1]) | (t[1:] != t[:-1])
    return rows if last.all() else rows.iloc[np.sort(order[last])].reset_index(drop=True)


def _window(clauses: list, params: list, lo: int | None, hi: int | None) -> None:
    """Add the ``ts`` bounds of a job-series or network read (either may be None: unbounded) to its filter."""
    if lo is not None:
        clauses.append("ts >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("ts < ?")
        params.append(hi)


def _ns(moment) -> int:
    return int(pd.Timestamp(moment).value)


def _canonical_types(frame: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({
        "ts": utc_from_ns(frame["ts"]),
        "cluster": frame["cluster"].astype(object), "host": frame["host"].astype(object),
        "gpu": frame["gpu"].astype("int16"), "uuid": frame["uuid"].astype(object),
        "field": frame["field"].astype("int32"), "value": frame["value"].astype("float64"),
    })
    return out[COLUMNS].reset_index(drop=True)
