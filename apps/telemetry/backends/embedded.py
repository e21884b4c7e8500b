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
import re
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from .base import (
    COLUMNS, DEFAULT_STATS, NET_AGGREGATE_COLUMNS, PERCENTILES, Query, TelemetryBackend, TelemetryUnavailable,
    app_frame_from_columns, app_names, app_window, canonical, canonical_app, canonical_net, check_stats,
    Expiry, TierError, deduplicate_app, deduplicate_net, empty_app_frame, empty_frame, empty_net_aggregate, net_filter,
    net_frame_from_columns, net_window, step_seconds, utc_from_ns,
)
from ..retention import DAY_NS, as_ns

NS = 1_000_000_000
HOUR_NS = 3600 * NS
ROLLUP_LEVELS = (60, 600, 3600)  # seconds; each level is built from the one before
NET_ROLLUP_LEVELS = (60, 600)
SCHEMA_VERSION = "3"  # 3: samples, rollups and network samples in day partitions (a version-2 file is moved in)

# Partitioned kinds: a table per UTC day, ``<kind>_YYYYMMDD``, and a view ``<kind>`` over all of them (for people and
# benches writing SQL by hand; the store's own reads name only the days a window touches).
_KIND_COLUMNS = {
    "samples": "series INTEGER NOT NULL, field SMALLINT NOT NULL, ts BIGINT NOT NULL, value DOUBLE NOT NULL",
    **{f"rollup_{level}": "series INTEGER NOT NULL, field SMALLINT NOT NULL, bucket BIGINT NOT NULL, n BIGINT NOT NULL, "
                           "total DOUBLE NOT NULL, lo DOUBLE NOT NULL, hi DOUBLE NOT NULL" for level in ROLLUP_LEVELS},
    "net_samples": "cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, nic VARCHAR NOT NULL, field VARCHAR NOT NULL, "
                   "ts BIGINT NOT NULL, value DOUBLE NOT NULL",
    **{f"net_rollup_{level}": "cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, nic VARCHAR NOT NULL, "
                              "field VARCHAR NOT NULL, bucket BIGINT NOT NULL, n BIGINT NOT NULL, "
                              "first DOUBLE NOT NULL, last DOUBLE NOT NULL, lo DOUBLE NOT NULL, "
                              "hi DOUBLE NOT NULL" for level in NET_ROLLUP_LEVELS},
}
_KIND_TIME = {kind: ("ts" if kind.endswith("samples") else "bucket") for kind in _KIND_COLUMNS}
_KIND_TIER = {"samples": ("gpu", "raw"), "rollup_60": ("gpu", "1m"), "rollup_600": ("gpu", "10m"),
              "rollup_3600": ("gpu", "10m"), "net_samples": ("net", "raw"), "net_rollup_60": ("net", "1m"),
              "net_rollup_600": ("net", "10m")}
_PARTITION = re.compile(r"^(?P<kind>[a-z0-9_]+?)_(?P<span>\d{8}(?:_\d+d)?|\d{10})$")
SPAN_10M_DAYS = 30  # the 10-minute tier's tables each span 30 days (a year is 13 tables per kind, not 365)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS store_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS series (
        id INTEGER NOT NULL, cluster VARCHAR NOT NULL, host VARCHAR NOT NULL, gpu SMALLINT NOT NULL, uuid VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS app_series (
        cluster VARCHAR NOT NULL, job_id BIGINT NOT NULL, name VARCHAR NOT NULL, ts BIGINT NOT NULL, step BIGINT,
        value DOUBLE NOT NULL)""",
]


class EmbeddedBackend(TelemetryBackend):
    name = "embedded telemetry store"
    percentiles_exact = True

    def __init__(self, path: str, lock_timeout: float = 30.0, threads: int | None = None, partition_hours: int = 24,
                 **options):
        super().__init__(path=path, lock_timeout=lock_timeout, threads=threads, partition_hours=partition_hours, **options)
        if int(partition_hours) not in (1, 24):
            raise TelemetryUnavailable(f"the embedded telemetry store's partition_hours is 24 (a table per day) or 1 "
                                       f"(a table per hour: short retentions, the demo), not {partition_hours!r}")
        self.partition_ns = int(partition_hours) * 3600 * NS
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
        if found and found[0] not in (SCHEMA_VERSION, "2"):
            raise TelemetryUnavailable(f"{self.name} {self.file} has layout {found[0]}, this portal writes layout "
                                       f"{SCHEMA_VERSION}; move the file away (it is rebuilt from the collectors and imports)")
        for statement in _SCHEMA:
            db.execute(statement)
        if found and found[0] == "2":
            self._move_layout_2_into_days(db)
        db.execute("INSERT OR REPLACE INTO store_info VALUES ('schema', ?)", [SCHEMA_VERSION])
        for kind in _KIND_COLUMNS:
            if not db.execute("SELECT 1 FROM duckdb_views() WHERE view_name = ? AND NOT internal", [kind]).fetchone():
                self._replace_view(db, kind)
        self._ready = True

    def _move_layout_2_into_days(self, db) -> None:
        """A version-2 file kept one table per kind; move each into its day partitions (once, in one transaction)."""
        tables = {row[0] for row in db.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        with self._transaction(db):
            for kind in ("samples", *[f"rollup_{level}" for level in ROLLUP_LEVELS], "net_samples"):
                if kind not in tables:
                    continue
                db.execute(f"ALTER TABLE {kind} RENAME TO {kind}_layout2")
                self._insert_in_spans(db, kind, f"{kind}_layout2")
                db.execute(f"DROP TABLE {kind}_layout2")
            if "net_samples" in tables:
                self._refresh_net_rollups(db, "net_samples")

    # -- day partitions ------------------------------------------------------------------------

    def _spans(self, db, kind: str) -> list[tuple[int, int, str]]:
        """(first ns, end ns, table) of every partition of ``kind``, in time order: day tables ``<kind>_YYYYMMDD`` and
        hour-span tables ``<kind>_YYYYMMDDHH`` (option ``partition_hours``), whichever the file holds."""
        spans = []
        for (name,) in db.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                  "AND table_name LIKE ?", [f"{kind}_%"]).fetchall():
            match = _PARTITION.match(name)
            if match and match["kind"] == kind:
                first, width = _span_of(match["span"])
                spans.append((first, first + width, name))
        return sorted(spans)

    def _width(self, kind: str) -> int:
        """A partition's width for ``kind``. Every operation opens the file, and DuckDB reads the whole catalogue when it
        does (1,300 tables: ~170 ms a connection, 8 tables: ~30 ms), so tables stay few: raw samples per
        ``partition_hours`` (a day, or an hour for retentions of hours), the 1-minute tier per day, the 10-minute tier
        per 30 days (a day when raw is kept for hours: the demo's short tiers). A partition goes once it lies wholly
        past its tier's horizon; reads never answer from before the horizon, whatever the width."""
        tier = _KIND_TIER[kind][1]
        if tier == "raw":
            return self.partition_ns
        if tier == "1m" or self.partition_ns < DAY_NS:
            return DAY_NS
        return SPAN_10M_DAYS * DAY_NS

    def _name(self, kind: str, first_ns: int) -> str:
        moment = _EPOCH + timedelta(microseconds=first_ns // 1000)
        width = self._width(kind)
        if width < DAY_NS:
            return f"{kind}_{moment:%Y%m%d%H}"
        return f"{kind}_{moment:%Y%m%d}" + ("" if width == DAY_NS else f"_{width // DAY_NS}d")

    def _relation(self, db, kind: str, lo: int | None, hi: int | None) -> str | None:
        """SQL for the rows of ``kind`` in the partitions that [lo, hi) touches (None: unbounded); None when no
        partition does."""
        tables = [name for first, end, name in self._spans(db, kind)
                  if (lo is None or end > lo) and (hi is None or first < hi)]
        if not tables:
            return None
        if len(tables) == 1:
            return tables[0]
        return "(" + " UNION ALL ".join(f"SELECT * FROM {name}" for name in tables) + ")"

    def _replace_view(self, db, kind: str) -> None:
        tables = [name for _, _, name in self._spans(db, kind)]
        if tables:
            body = " UNION ALL ".join(f"SELECT * FROM {name}" for name in tables)
        else:
            columns = ", ".join(f"NULL::{part.split()[1]} AS {part.split()[0]}" for part in _KIND_COLUMNS[kind].split(", "))
            body = f"SELECT {columns} WHERE false"
        db.execute(f"CREATE OR REPLACE VIEW {kind} AS {body}")

    def _insert_in_spans(self, db, kind: str, source: str, where: str = "", params: list | None = None) -> None:
        """Insert the rows of relation ``source`` (the columns of ``kind``, in order) into their partitions (of
        ``partition_hours``), creating the missing ones (and the view over them)."""
        column, width = _KIND_TIME[kind], self._width(kind)
        filter_sql = f" WHERE {where}" if where else ""
        found = db.execute(f"SELECT DISTINCT {column} // {width} FROM {source}{filter_sql}", params or []).fetchall()
        existing, created = {name for _, _, name in self._spans(db, kind)}, False
        for (number,) in sorted(found):
            first = number * width
            table = self._name(kind, first)
            if table not in existing:
                db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({_KIND_COLUMNS[kind]})")
                created = True
            clause = f"{column} >= {first} AND {column} < {first + width}"
            db.execute(f"INSERT INTO {table} SELECT * FROM {source} WHERE {clause}{' AND ' + where if where else ''}",
                       params or [])
        if created:
            self._replace_view(db, kind)

    def _delete_in_spans(self, db, kind: str, lo: int | None, hi: int | None, where: str, params: list,
                       using: str = "") -> None:
        """``DELETE FROM`` each partition of ``kind`` that [lo, hi) touches, as ``r`` (``using``: ``USING ...``)."""
        column = _KIND_TIME[kind]
        for first, end, name in self._spans(db, kind):
            if (lo is not None and end <= lo) or (hi is not None and first >= hi):
                continue
            db.execute(f"DELETE FROM {name} AS r {using} WHERE r.{column} >= ? AND r.{column} < ? "
                       f"AND ({where})", [lo if lo is not None else -2**63, hi if hi is not None else 2**63 - 1, *params])

    def _horizons(self) -> dict[str, int]:
        now = self.now()
        return {tier: self.retention.horizon_ns(tier, now) for tier in ("raw", "1m", "10m")}

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
        """Store samples and refresh their rollups. Samples already past the raw tier's horizon are stored too (the
        next retention pass drops their partition; no raw read returns them): their rollups are added where the store
        has none for their bucket, never replacing one built while the bucket's raw samples were complete (see
        ``_refresh_rollups``)."""
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
                    # Only when the batch overlaps stored time: new data (the common case) skips the join.
                    stored = self._relation(db, "samples", lo, hi + 1)
                    if stored and db.execute(f"SELECT 1 FROM {stored} WHERE ts BETWEEN ? AND ? LIMIT 1", [lo, hi]).fetchone():
                        self._delete_in_spans(db, "samples", lo, hi + 1, "r.ts = b.ts AND r.series = b.series AND r.field = b.field",
                                            [], using="USING batch b")
                    self._insert_in_spans(db, "samples", "batch")
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
        kind, time_column, aggregates = "samples", "ts", "count(*), sum(r.value), min(r.value), max(r.value)"
        raw_horizon = self._horizons()["raw"]
        for level in ROLLUP_LEVELS:
            width = level * NS
            lo, hi = lo_ts - lo_ts % width, hi_ts - hi_ts % width + width
            cut = max(lo, min(hi, raw_horizon - raw_horizon % width))  # buckets before it lie wholly past the raw horizon
            if cut < hi:
                self._delete_in_spans(db, f"rollup_{level}", cut, hi, join, [], using="USING touched t")
            source = self._relation(db, kind, lo, hi)
            if source is not None:
                db.execute(f"""CREATE OR REPLACE TEMP TABLE fresh AS
                               SELECT r.series, r.field, r.{time_column} - (r.{time_column} % {width}) AS bucket, {aggregates}
                               FROM {source} r SEMI JOIN touched t ON {join}
                               WHERE r.{time_column} >= ? AND r.{time_column} < ?
                               GROUP BY ALL""", [lo, hi])
                self._keep_built(db, "fresh", f"rollup_{level}", ("series", "field"), lo, cut)
                self._insert_in_spans(db, f"rollup_{level}", "fresh")
            kind, time_column, aggregates = f"rollup_{level}", "bucket", "sum(r.n), sum(r.total), min(r.lo), max(r.hi)"

    def _keep_built(self, db, fresh: str, kind: str, keys: tuple, lo: int, cut: int) -> None:
        """Leave out of ``fresh`` the rollup buckets before ``cut`` (wholly past the raw horizon) that ``kind`` already
        holds: built while the bucket's raw samples were all there, they stay; a late write only adds missing ones."""
        if lo >= cut:
            return
        built = self._relation(db, kind, lo, cut)
        if built is None:
            return
        same = " AND ".join(f"b.{key} = f.{key}" for key in (*keys, "bucket"))
        db.execute(f"DELETE FROM {fresh} f WHERE f.bucket < ? AND EXISTS (SELECT 1 FROM {built} b WHERE {same})", [cut])

    # -- reading -------------------------------------------------------------------------------

    def read(self, query: Query) -> pd.DataFrame:
        """Raw samples in the window, never before the raw tier's horizon."""
        lo, hi = max(_ns(query.start), self._horizons()["raw"]), _ns(query.end)
        if lo >= hi:
            return empty_frame()
        with self._connect() as db:
            source = self._relation(db, "samples", lo, hi)
            where = self._where(db, query, "ts", lo, hi) if source else None
            if where is None:
                return empty_frame()
            raw = db.execute(f"SELECT series, field, ts, value FROM {source} WHERE {where[0]}", where[1]).df()
            if raw.empty:
                return empty_frame()
            out = self._with_names(db, raw)
        return _canonical_types(out).sort_values(["cluster", "host", "gpu", "field", "ts"], kind="stable", ignore_index=True)

    def latest(self, query: Query) -> pd.DataFrame:
        lo, hi = max(_ns(query.start), self._horizons()["raw"]), _ns(query.end)
        if lo >= hi:
            return empty_frame()
        with self._connect() as db:
            source = self._relation(db, "samples", lo, hi)
            where = self._where(db, query, "ts", lo, hi) if source else None
            if where is None:
                return empty_frame()
            raw = db.execute(f"""SELECT series, field, max(ts) AS ts, arg_max(value, ts) AS value
                                 FROM {source} WHERE {where[0]} GROUP BY series, field""", where[1]).df()
            if raw.empty:
                return empty_frame()
            out = self._with_names(db, raw)
        return _canonical_types(out).sort_values(["cluster", "host", "gpu", "field"], kind="stable", ignore_index=True)

    def aggregate(self, query: Query, step, stats=DEFAULT_STATS) -> pd.DataFrame:
        """Buckets from the finest tier holding each part of the window (``retention.py``): raw samples after the raw
        horizon (the rollups of the buckets wholly inside the window, the raw samples of its partial edges), rollups
        before it. A bucket before the raw horizon is answered whole, from its rollup, even where the window cuts it."""
        step = step_seconds(step)
        stats = check_stats(stats)
        width = step * NS
        start, end = _ns(query.start), _ns(query.end)
        horizons = self._horizons()
        wants_percentiles = any(name in PERCENTILES for name in stats)
        level = next((lv for lv in reversed(ROLLUP_LEVELS) if step % lv == 0), None)
        if start < horizons["raw"]:
            self.retention.check_step(start, self.now(), step, wants_percentiles, end=end)
            start = max(start, horizons["10m"])  # nothing before the coarsest tier is kept: an empty part
        parts = []
        with self._connect() as db:
            if horizons["raw"] > start < end:
                # before the raw horizon: whole buckets of the rollup level, up to the bucket holding the horizon
                tier_horizon = horizons["1m"] if level == 60 else horizons["10m"]
                lo = -(-start // width) * width if start < tier_horizon else start - start % width
                lo = max(lo, -(-tier_horizon // width) * width)
                cut = min(-(-horizons["raw"] // width) * width, -(-end // width) * width)
                if lo < cut:
                    parts.append(self._aggregate_rollup(db, query, width, level, lo, cut))
                start = max(start, cut)
            if start < end:
                inner_lo = -(-start // width) * width  # the first bucket edge inside the window
                inner_hi = end // width * width
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
        source = self._relation(db, "samples", lo, hi)
        where = self._where(db, query, "ts", lo, hi) if source else None
        if where is None:
            return None
        extra = "".join(f", quantile_cont(value, {PERCENTILES[name]}) AS {name}" for name in stats if name in PERCENTILES)
        return pd.DataFrame(db.execute(f"""SELECT ts - (ts % {width}) AS bucket, series, field, count(*) AS count,
                                                  sum(value) AS total, min(value) AS min, max(value) AS max{extra}
                                           FROM {source} WHERE {where[0]} GROUP BY ALL""", where[1]).fetchnumpy())

    def _aggregate_rollup(self, db, query, width, level, lo, hi) -> pd.DataFrame | None:
        source = self._relation(db, f"rollup_{level}", lo, hi)
        where = self._where(db, query, "bucket", lo, hi) if source else None
        if where is None:
            return None
        if width == level * NS:
            sql = f"""SELECT bucket, series, field, n AS count, total, lo AS min, hi AS max
                      FROM {source} WHERE {where[0]}"""
        else:
            sql = f"""SELECT bucket - (bucket % {width}) AS bucket, series, field, sum(n) AS count,
                             sum(total) AS total, min(lo) AS min, max(hi) AS max
                      FROM {source} WHERE {where[0]} GROUP BY ALL"""
        return pd.DataFrame(db.execute(sql, where[1]).fetchnumpy())

    # -- maintenance ---------------------------------------------------------------------------

    def delete(self, query: Query) -> int:
        lo, hi = _ns(query.start), _ns(query.end)
        with self._connect() as db:
            source = self._relation(db, "samples", lo, hi)
            where = self._where(db, query, "ts", lo, hi) if source else None
            if where is None:
                return 0
            with self._transaction(db):
                db.execute(f"CREATE OR REPLACE TEMP TABLE deleted AS SELECT series, field, ts FROM {source} WHERE {where[0]}",
                           where[1])
                removed = db.execute("SELECT count(*) FROM deleted").fetchone()[0]
                if removed:
                    self._delete_in_spans(db, "samples", lo, hi, where[0], where[1])
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
        """Store network (and host) samples in their partitions. Their rollups are built by the retention pass, an hour
        at a time, for every complete hour not yet rolled up (``roll_up_net``): reads use rollups only before the raw
        horizon, so they need not exist sooner, and a write at a whole machine's NIC rate stays a plain insert."""
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate_net(canonical_net(frame))
        rows = pd.DataFrame({
            "cluster": batch["cluster"].to_numpy(object), "host": batch["host"].to_numpy(object),
            "nic": batch["nic"].to_numpy(object), "field": batch["field"].to_numpy(object),
            "ts": batch["ts"].astype("int64").to_numpy(), "value": batch["value"].to_numpy("float64")})
        lo, hi = int(rows["ts"].min()), int(rows["ts"].max())
        same_key = " AND ".join(f"r.{column} = b.{column}" for column in ("ts", "host", "nic", "field", "cluster"))
        with self._connect() as db:
            db.register("net_batch", rows)
            try:
                with self._transaction(db):
                    stored = self._relation(db, "net_samples", lo, hi + 1)
                    if stored and db.execute(f"SELECT 1 FROM {stored} WHERE ts BETWEEN ? AND ? LIMIT 1", [lo, hi]).fetchone():
                        self._delete_in_spans(db, "net_samples", lo, hi + 1, same_key, [], using="USING net_batch b")
                    self._insert_in_spans(db, "net_samples", "net_batch")
                    # the hours this batch reached are rolled up (again) by the next retention pass
                    hours = range(lo // HOUR_NS, hi // HOUR_NS + 1)
                    db.execute("DELETE FROM store_info WHERE list_contains(?, key)", [[_rolled_key(h) for h in hours]])
            finally:
                db.unregister("net_batch")
        return len(rows)

    def _refresh_net_rollups(self, db, changed: str) -> None:
        """Recompute the 1- and 10-minute network rollups (count, first and last with their times, min, max) of the
        series in ``changed`` between its first and last timestamp."""
        lo_ts, hi_ts = db.execute(f"SELECT min(ts), max(ts) FROM {changed}").fetchone()
        if lo_ts is None:
            return
        db.execute(f"CREATE OR REPLACE TEMP TABLE net_touched AS SELECT DISTINCT cluster, host, nic, field FROM {changed}")
        join = "r.cluster = t.cluster AND r.host = t.host AND r.nic = t.nic AND r.field = t.field"
        kind, time_column = "net_samples", "ts"
        aggregates = "count(*), arg_min(r.value, r.ts), arg_max(r.value, r.ts), min(r.value), max(r.value)"
        raw_horizon = self._horizons()["raw"]
        for level in NET_ROLLUP_LEVELS:
            width = level * NS
            lo, hi = lo_ts - lo_ts % width, hi_ts - hi_ts % width + width
            cut = max(lo, min(hi, raw_horizon - raw_horizon % width))
            if cut < hi:
                self._delete_in_spans(db, f"net_rollup_{level}", cut, hi, join, [], using="USING net_touched t")
            source = self._relation(db, kind, lo, hi)
            if source is not None:
                db.execute(f"""CREATE OR REPLACE TEMP TABLE net_fresh AS
                               SELECT r.cluster, r.host, r.nic, r.field, r.{time_column} - (r.{time_column} % {width})
                                      AS bucket, {aggregates}
                               FROM {source} r SEMI JOIN net_touched t ON {join}
                               WHERE r.{time_column} >= ? AND r.{time_column} < ?
                               GROUP BY ALL""", [lo, hi])
                self._keep_built(db, "net_fresh", f"net_rollup_{level}", ("cluster", "host", "nic", "field"), lo, cut)
                self._insert_in_spans(db, f"net_rollup_{level}", "net_fresh")
            # a coarser bucket's first sample is the first of its earliest finer bucket, its last the last of its latest
            kind, time_column = f"net_rollup_{level}", "bucket"
            aggregates = "sum(r.n), arg_min(r.first, r.bucket), arg_max(r.last, r.bucket), min(r.lo), max(r.hi)"

    @staticmethod
    def _net_filter(cluster, hosts, nics, fields) -> tuple[str, list] | None:
        """SQL filter of a network read's names; None when it can match nothing."""
        clauses, params = ["cluster = ?"], [str(cluster)]
        for column, values in (("host", net_filter(hosts, "hosts")), ("nic", net_filter(nics, "nics")),
                               ("field", net_filter(fields, "fields"))):
            if values is not None:
                if not values:
                    return None
                clauses.append(f"list_contains(?, {column})")
                params.append(list(values))
        return " AND ".join(clauses), params

    def read_net(self, cluster: str, hosts=None, nics=None, fields=None, start=None, end=None) -> pd.DataFrame:
        """Raw network samples, never before the raw tier's horizon."""
        empty = net_frame_from_columns([], [], [], [], [], [])
        lo, hi = net_window(start, end)
        lo = max(lo if lo is not None else -2**63, self._horizons()["raw"])
        names = self._net_filter(cluster, hosts, nics, fields)
        if names is None or (hi is not None and lo >= hi):
            return empty
        clauses, params = [names[0]], list(names[1])
        _window(clauses, params, lo, hi)
        with self._connect() as db:
            source = self._relation(db, "net_samples", lo, hi)
            if source is None:
                return empty
            found = db.execute(f"""SELECT ts, cluster, host, nic, field, value FROM {source}
                                   WHERE {' AND '.join(clauses)} ORDER BY host, nic, field, ts""", params).fetchnumpy()
        return net_frame_from_columns(found["ts"], found["cluster"], found["host"], found["nic"], found["field"],
                                      found["value"])

    def aggregate_net(self, cluster: str, step, hosts=None, nics=None, fields=None, start=None,
                      end=None) -> pd.DataFrame:
        """Buckets from raw samples after the raw horizon and from the rollups before it (whole buckets). Without
        ``start`` the window begins where the finest tier that can answer ``step`` begins."""
        step = step_seconds(step)
        width = step * NS
        level = next((lv for lv in reversed(NET_ROLLUP_LEVELS) if step % lv == 0), None)
        lo, hi = net_window(start, end)
        horizons = self._horizons()
        if lo is None:
            lo = horizons["raw"] if level is None else horizons["1m"] if level == 60 else horizons["10m"]
        names = self._net_filter(cluster, hosts, nics, fields)
        if names is None or (hi is not None and lo >= hi):
            return empty_net_aggregate()
        parts = []
        with self._connect() as db:
            if lo < horizons["raw"]:
                self.retention.check_step(lo, self.now(), step, end=hi)
                lo = max(lo, horizons["10m"])  # nothing before the coarsest tier is kept: an empty part
                tier_horizon = horizons["1m"] if level == 60 else horizons["10m"]
                first = max(lo - lo % width, -(-tier_horizon // width) * width)
                cut = -(-horizons["raw"] // width) * width
                if hi is not None:
                    cut = min(cut, -(-hi // width) * width)
                source = self._relation(db, f"net_rollup_{level}", first, cut)
                if source is not None and first < cut:
                    parts.append(db.execute(f"""
                        SELECT bucket - (bucket % {width}) AS bucket, cluster, host, nic, field, sum(n) AS count,
                               arg_min(first, bucket) AS first, arg_max(last, bucket) AS last, min(lo) AS min,
                               max(hi) AS max
                        FROM {source} WHERE {names[0]} AND bucket >= ? AND bucket < ? GROUP BY ALL""",
                        [*names[1], first, cut]).fetchnumpy())
                lo = max(lo, cut)
            if hi is None or lo < hi:
                clauses, params = [names[0]], list(names[1])
                _window(clauses, params, lo, hi)
                source = self._relation(db, "net_samples", lo, hi)
                if source is not None:
                    parts.append(db.execute(f"""
                        SELECT ts - (ts % {width}) AS bucket, cluster, host, nic, field, count(*) AS count,
                               arg_min(value, ts) AS first, arg_max(value, ts) AS last, min(value) AS min, max(value) AS max
                        FROM {source} WHERE {' AND '.join(clauses)} GROUP BY ALL""", params).fetchnumpy())
        parts = [part for part in parts if len(part["bucket"])]
        if not parts:
            return empty_net_aggregate()
        out = pd.concat([pd.DataFrame({name: part[name] for name in NET_AGGREGATE_COLUMNS}) for part in parts],
                        ignore_index=True)
        out["bucket"] = utc_from_ns(out["bucket"])
        for column in ("cluster", "host", "nic", "field"):
            out[column] = out[column].astype(object)
        out["count"] = out["count"].astype("int64")
        for column in ("first", "last", "min", "max"):
            out[column] = out[column].astype("float64")
        return out[NET_AGGREGATE_COLUMNS]

    def delete_net(self, cluster: str, hosts=None) -> int:
        names = self._net_filter(cluster, hosts, None, None)
        if names is None:
            return 0
        with self._connect() as db, self._transaction(db):
            source = self._relation(db, "net_samples", None, None)
            removed = db.execute(f"SELECT count(*) FROM {source} WHERE {names[0]}", names[1]).fetchone()[0] if source else 0
            for kind in ("net_samples", *[f"net_rollup_{level}" for level in NET_ROLLUP_LEVELS]):
                self._delete_in_spans(db, kind, None, None, names[0], names[1])
        return int(removed)

    # -- retention -----------------------------------------------------------------------------

    def _expired(self, db, now) -> list[Expiry]:
        sizes = dict(db.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = 'main'")
                     .fetchall())
        found = []
        for kind, (source, tier) in _KIND_TIER.items():
            horizon = self.retention.horizon_ns(tier, now)
            for first, end, name in self._spans(db, kind):
                if end <= horizon:
                    found.append(Expiry(source, tier, name, _EPOCH + timedelta(microseconds=first // 1000),
                                        _EPOCH + timedelta(microseconds=end // 1000), sizes.get(name)))
        return found

    EXPIRE_BATCH = 64  # partitions dropped per transaction: the file's write lock is held for that many DROPs at most

    ROLL_UP_SECONDS = 60.0  # a pass rolls up network hours for at most this long (oldest first); the next goes on

    def roll_up_net(self, now=None, budget_s: float | None = None) -> int:
        """Build the network rollups of every complete hour of network samples not rolled up since it was last written,
        oldest first, for at most ``budget_s`` seconds (default ``ROLL_UP_SECONDS``; a worker is not held for long after
        a large import or the demo's history): one short transaction per hour; hours wholly past the raw horizon only
        gain buckets they lack. Idempotent; how many hours were rolled up."""
        deadline = time.monotonic() + (self.ROLL_UP_SECONDS if budget_s is None else budget_s)
        until = as_ns(now or self.now()) // HOUR_NS * HOUR_NS  # the current hour is not complete
        with self._connect() as db:
            done = {key for (key,) in db.execute("SELECT key FROM store_info WHERE key LIKE 'net-rolled:%'").fetchall()}
            hours = set()
            for first, end, name in self._spans(db, "net_samples"):
                if first >= until:
                    continue
                hours.update(h for (h,) in db.execute(f"SELECT DISTINCT ts // {HOUR_NS} FROM {name} WHERE ts < ?",
                                                        [until]).fetchall())
        waiting = sorted(h for h in hours if _rolled_key(h) not in done)
        rolled = 0
        for hour in waiting:
            if rolled and time.monotonic() > deadline:
                break
            rolled += 1
            with self._connect() as db, self._transaction(db):
                source = self._relation(db, "net_samples", hour * HOUR_NS, (hour + 1) * HOUR_NS)
                db.execute(f"CREATE OR REPLACE TEMP TABLE net_hour AS SELECT * FROM {source} WHERE ts >= ? AND ts < ?",
                           [hour * HOUR_NS, (hour + 1) * HOUR_NS])
                self._refresh_net_rollups(db, "net_hour")
                db.execute("INSERT OR REPLACE INTO store_info VALUES (?, 'yes')", [_rolled_key(hour)])
        return rolled

    def _unrolled_from(self, db, now) -> int | None:
        """The first instant of the earliest complete hour of network samples not rolled up yet (None: all are): no raw
        network partition from there on may go, or its rollups would be lost."""
        until = as_ns(now) // HOUR_NS * HOUR_NS
        done = {key for (key,) in db.execute("SELECT key FROM store_info WHERE key LIKE 'net-rolled:%'").fetchall()}
        for first, end, name in self._spans(db, "net_samples"):
            if first >= until:
                break
            for (hour,) in db.execute(f"SELECT DISTINCT ts // {HOUR_NS} AS h FROM {name} WHERE ts < ? ORDER BY h",
                                      [until]).fetchall():
                if _rolled_key(hour) not in done:
                    return hour * HOUR_NS
        return None

    def expire(self, now=None, dry_run: bool = False, progress=None) -> list[Expiry]:
        """Drop every partition lying wholly before its tier's horizon, ``EXPIRE_BATCH`` per short transaction (ingestion
        waits at most that many DROP TABLEs for the file, never the whole pass), then rebuild the views of the kinds
        that lost tables once, and let DuckDB reuse the space (CHECKPOINT). Rollups are kept on every write, so nothing
        has to be built before raw partitions go. The store's own reads never use the views."""
        now = now or self.now()
        if not dry_run:
            self.roll_up_net(now)  # before any raw hour can go
        with self._connect() as db:
            found = self._expired(db, now)
            unrolled = self._unrolled_from(db, now)
        if unrolled is not None:  # raw network partitions not rolled up yet wait for a later pass
            found = [item for item in found if not (item.partition.startswith("net_samples_")
                                                    and as_ns(item.last) > unrolled)]
        if dry_run or not found:
            return found
        done = 0
        for first in range(0, len(found), self.EXPIRE_BATCH):
            batch = found[first:first + self.EXPIRE_BATCH]
            with self._connect() as db, self._transaction(db):
                for item in batch:
                    db.execute(f"DROP TABLE IF EXISTS {item.partition}")
            for item in batch:
                done += 1
                if progress is not None:
                    progress(done, len(found), item)
        with self._connect() as db:
            with self._transaction(db):
                for kind in sorted({_PARTITION.match(item.partition)["kind"] for item in found}):
                    self._replace_view(db, kind)
                oldest = min((first for first, _, name in self._spans(db, "net_samples")), default=None)
                if oldest is not None:  # forget the marks of hours whose samples are gone
                    db.execute("DELETE FROM store_info WHERE key LIKE 'net-rolled:%' AND key < ?",
                               [_rolled_key(oldest // HOUR_NS)])
            db.execute("CHECKPOINT")
        return found

    def footprint(self) -> dict:
        """Rows and DuckDB's estimated bytes per kind of partition (``manage.py telemetry_retention``, benches)."""
        with self._connect() as db:
            tables = db.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
            blocks = db.execute("SELECT total_blocks, used_blocks, free_blocks, block_size FROM pragma_database_size()").fetchone()
        out: dict = {}
        for name, rows in tables:
            match = _PARTITION.match(name)
            if match and match["kind"] in _KIND_COLUMNS:
                entry = out.setdefault(match["kind"], {"partitions": 0, "rows": 0})
                entry["partitions"] += 1
                entry["rows"] += int(rows or 0)
        out["file_bytes"] = self.file.stat().st_size if self.file.exists() else 0
        if blocks:
            out["used_bytes"] = int(blocks[1]) * int(blocks[3])
            out["free_bytes"] = int(blocks[2]) * int(blocks[3])
        return out

    # -- maintenance, continued ----------------------------------------------------------------

    def check(self) -> str:
        with self._connect() as db:
            sizes = db.execute("SELECT table_name, estimated_size FROM duckdb_tables() WHERE schema_name = 'main' "
                               "AND table_name LIKE 'samples_%'").fetchall()
        rows = sum(int(size or 0) for name, size in sizes if _PARTITION.match(name)["kind"] == "samples")
        size = self.file.stat().st_size if self.file.exists() else 0
        return f"{self.name} {self.file}: {rows:,} samples, {size / 2**20:,.1f} MiB ({self.retention.describe()})"

    def clear(self) -> None:
        """Remove everything, job series and network samples included (tests, demo reset)."""
        with self._connect() as db, self._transaction(db):
            for kind in _KIND_COLUMNS:
                for _, _, name in self._spans(db, kind):
                    db.execute(f"DROP TABLE {name}")
                self._replace_view(db, kind)
            for table in ("series", "app_series"):
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


def _span_of(text: str) -> tuple[int, int]:
    """A partition's name suffix → (first ns, width ns): 'YYYYMMDD' a UTC day, 'YYYYMMDD_30d' 30 days from that day,
    'YYYYMMDDHH' one hour."""
    if len(text) == 10:
        moment = datetime.strptime(text, "%Y%m%d%H").replace(tzinfo=timezone.utc)
        return int((moment - _EPOCH).total_seconds()) * NS, 3600 * NS
    day, _, days = text.partition("_")
    moment = datetime.strptime(day, "%Y%m%d").replace(tzinfo=timezone.utc)
    return int((moment - _EPOCH).total_seconds()) * NS, int(days[:-1] or 1) * DAY_NS


def _rolled_key(hour: int) -> str:
    """The ``store_info`` key saying the network rollups of hour number ``hour`` (since the epoch) are built."""
    return f"net-rolled:{(_EPOCH + timedelta(hours=int(hour))):%Y%m%d%H}"
