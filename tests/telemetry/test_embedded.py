"""The embedded (DuckDB) telemetry store: the shared contract, plus what only it has to get right."""
import multiprocessing
from datetime import timedelta

import pytest

from apps.telemetry.backends.base import Query, TelemetryUnavailable
from apps.telemetry.backends.embedded import EmbeddedBackend

from .contract import T0, BackendContract, app_synthetic, assert_app_frames_equal, sorted_app, synthetic


# The samples these tests write are dated 2026-11-21 (``T0``); a century's retention keeps them readable whatever today is.
CENTURY = {"raw_days": 36500, "m1_days": 36500, "m10_days": 36500}


@pytest.fixture
def backend(tmp_path):
    store = EmbeddedBackend(path=str(tmp_path / "telemetry"), retention=CENTURY)
    yield store
    store.close()


class TestEmbeddedContract(BackendContract):
    pass


def _write_in_another_process(path, seed, queue):
    store = EmbeddedBackend(path=path, lock_timeout=60, retention=CENTURY)
    written = 0
    for minute in range(5):
        written += store.write(synthetic(hosts=(f"nid{seed:06d}",), minutes=1, start=T0 + timedelta(minutes=minute), seed=seed))
    queue.put(written)


def test_processes_writing_at_once_wait_for_each_other(tmp_path):
    path = str(tmp_path / "telemetry")
    queue = multiprocessing.get_context("spawn").Queue()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_in_another_process, args=(path, seed, queue)) for seed in (1, 2, 3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert sorted(queue.get() for _ in workers) == [5 * 48] * 3
    out = EmbeddedBackend(path=path, retention=CENTURY).read(Query(start=T0, end=T0 + timedelta(hours=1)))
    assert sorted(out["host"].unique()) == ["nid000001", "nid000002", "nid000003"] and len(out) == 3 * 5 * 48


def test_a_locked_store_fails_with_a_message_naming_the_file(tmp_path):
    store = EmbeddedBackend(path=str(tmp_path / "telemetry"), lock_timeout=0.3)
    store.check()
    context = multiprocessing.get_context("spawn")
    locked = context.Event()
    holder = context.Process(target=_hold_lock, args=(str(store.file), locked))
    holder.start()
    try:
        assert locked.wait(120), "the other process never took the lock"
        with pytest.raises(TelemetryUnavailable, match="stayed locked by another process"):
            store.check()
    finally:
        holder.terminate()
        holder.join()


def _hold_lock(path, locked):
    import time

    import duckdb

    connection = duckdb.connect(path)
    locked.set()
    time.sleep(300)
    connection.close()


def test_an_unwritable_path_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(TelemetryUnavailable, match=str(blocker)):
        EmbeddedBackend(path=str(blocker / "telemetry")).check()


def test_a_store_file_from_before_job_series_gains_their_table_and_keeps_its_samples(tmp_path):
    """A file written before ``app_series`` existed (same schema version, no such table) opens, keeps
    its samples, and takes job series."""
    import duckdb

    path = str(tmp_path / "telemetry")
    old = EmbeddedBackend(path=path, retention=CENTURY)
    samples = synthetic(minutes=2)
    old.write(samples)
    connection = duckdb.connect(str(old.file))
    connection.execute("DROP TABLE app_series")
    tables = {row[0] for row in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    connection.close()
    assert "app_series" not in tables and "samples" in tables

    store = EmbeddedBackend(path=path, retention=CENTURY)  # a new process's first open
    assert len(store.read(Query(start=T0, end=T0 + timedelta(hours=1)))) == len(samples)
    series = app_synthetic()
    assert store.write_job_series(series) == len(series)
    assert_app_frames_equal(store.read_job_series("alps", 4242), sorted_app(series))


def test_clear_removes_job_series_too(backend):
    backend.write(synthetic(minutes=1))
    backend.write_job_series(app_synthetic())
    backend.clear()
    assert backend.read_job_series("alps", 4242).empty
    assert backend.read(Query(start=T0, end=T0 + timedelta(hours=1))).empty


def test_a_layout_2_file_moves_its_tables_into_day_partitions_and_keeps_every_sample(tmp_path):
    """A store written before the tiers (issue 40) kept one table per kind; opening it moves every row into the day
    partitions once, and the aggregates, network rollups included, answer as before."""
    import duckdb
    import pandas as pd

    from apps.telemetry.backends.base import sort_aggregate, aggregate_frame

    from .contract import assert_frames_equal, expected_net_aggregate, net_synthetic

    path = tmp_path / "telemetry"
    path.mkdir()
    samples = synthetic(minutes=30, start=T0 - timedelta(minutes=10))
    net = net_synthetic(minutes=5)
    db = duckdb.connect(str(path / "telemetry.duckdb"))
    db.execute("CREATE TABLE store_info (key VARCHAR PRIMARY KEY, value VARCHAR)")
    db.execute("INSERT INTO store_info VALUES ('schema', '2')")
    db.execute("CREATE TABLE series (id INTEGER, cluster VARCHAR, host VARCHAR, gpu SMALLINT, uuid VARCHAR)")
    db.execute("CREATE TABLE samples (series INTEGER, field SMALLINT, ts BIGINT, value DOUBLE)")
    for level in (60, 600, 3600):
        db.execute(f"CREATE TABLE rollup_{level} (series INTEGER, field SMALLINT, bucket BIGINT, n BIGINT, total DOUBLE, "
                   "lo DOUBLE, hi DOUBLE)")
    db.execute("CREATE TABLE net_samples (cluster VARCHAR, host VARCHAR, nic VARCHAR, field VARCHAR, ts BIGINT, value DOUBLE)")
    keys = samples[["cluster", "host", "gpu", "uuid"]].drop_duplicates().reset_index(drop=True)
    keys["id"] = range(len(keys))
    db.register("k", keys)
    db.execute("INSERT INTO series SELECT id, cluster, host, gpu, uuid FROM k")
    rows = samples.merge(keys, on=["cluster", "host", "gpu", "uuid"])
    db.register("s", pd.DataFrame({"series": rows["id"], "field": rows["field"], "ts": rows["ts"].dt.as_unit("ns").astype("int64"),
                                   "value": rows["value"]}))
    db.execute("INSERT INTO samples SELECT * FROM s")
    for level, source, column, aggregates in ((60, "samples", "ts", "count(*), sum(value), min(value), max(value)"),
                                              (600, "rollup_60", "bucket", "sum(n), sum(total), min(lo), max(hi)"),
                                              (3600, "rollup_600", "bucket", "sum(n), sum(total), min(lo), max(hi)")):
        width = level * 1_000_000_000
        db.execute(f"INSERT INTO rollup_{level} SELECT series, field, {column} - {column} % {width}, {aggregates} "
                   f"FROM {source} GROUP BY ALL")
    db.register("n", pd.DataFrame({"cluster": net["cluster"], "host": net["host"], "nic": net["nic"],
                                   "field": net["field"], "ts": net["ts"].dt.as_unit("ns").astype("int64"), "value": net["value"]}))
    db.execute("INSERT INTO net_samples SELECT * FROM n")
    db.close()

    store = EmbeddedBackend(path=str(path), retention=CENTURY)
    window = Query(start=T0 - timedelta(hours=1), end=T0 + timedelta(hours=1))
    assert len(store.read(window)) == len(samples)
    for step in (60, 600, 3600):
        assert_frames_equal(sort_aggregate(store.aggregate(window, step)), aggregate_frame(samples, step))
    got = store.aggregate_net("alps", 60, start=T0 - timedelta(hours=1)).sort_values(
        ["bucket", "host", "nic", "field"], ignore_index=True)
    assert got["last"].tolist() == expected_net_aggregate(net, 60)["last"].tolist()
    connection = duckdb.connect(str(store.file))
    tables = {row[0] for row in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    connection.close()
    assert {"samples_20261121", "rollup_60_20261121", "net_samples_20261121", "net_rollup_60_20261121"} <= tables
    # the 10-minute tier: 30-day tables from the epoch on (2026-11-03 .. 2026-12-02 holds the 21st)
    assert {"rollup_600_20261103_30d", "rollup_3600_20261103_30d", "net_rollup_600_20261103_30d"} <= tables
    assert not {"samples", "rollup_60", "net_samples"} & tables  # views now, over the partitions


def test_a_late_write_past_the_raw_horizon_adds_missing_rollups_and_never_replaces_built_ones(tmp_path):
    """Samples sent after their raw tier let them go (a late import, the demo writing its history): no raw read returns
    them; their rollups fill buckets the store has none for, and the buckets built while their raw samples were all
    there stay as built (a partial re-send would otherwise replace a whole minute by its few re-sent samples)."""
    import pandas as pd

    from apps.telemetry.backends.base import aggregate_frame, sort_aggregate
    from apps.telemetry.retention import Retention

    from .contract import assert_frames_equal

    store = EmbeddedBackend(path=str(tmp_path / "telemetry"))
    store.clock = lambda: T0 + timedelta(days=1)
    data = synthetic(minutes=20)
    store.write(data)
    store.retention, store.clock = Retention(), (lambda: T0 + timedelta(days=31))
    assert store.expire()
    changed = data[data.ts < T0 + timedelta(minutes=5)].assign(value=-1.0)  # a partial re-send, other values
    late = synthetic(minutes=10, start=T0 + timedelta(minutes=20), seed=9)  # minutes the store never had
    assert store.write(pd.concat([changed, late], ignore_index=True)) == len(changed) + len(late)
    window = Query(start=T0, end=T0 + timedelta(hours=1))
    assert store.read(window).empty
    for step in (60, 600):
        assert_frames_equal(sort_aggregate(store.aggregate(window, step)),
                            aggregate_frame(pd.concat([data, late], ignore_index=True), step))
    assert store.expire(), "the late samples' raw partition goes with the next pass"
    assert_frames_equal(sort_aggregate(store.aggregate(window, 60)),
                        aggregate_frame(pd.concat([data, late], ignore_index=True), 60))


def test_hourly_partitions_keep_the_contract_and_let_a_short_raw_retention_go_hour_by_hour(tmp_path):
    from apps.telemetry.backends.base import aggregate_frame, sort_aggregate

    from .contract import assert_frames_equal, expected_net_aggregate, net_synthetic

    store = EmbeddedBackend(path=str(tmp_path / "telemetry"), partition_hours=1,
                            retention={"raw_days": 0.25, "m1_days": 1, "m10_days": 7})
    store.clock = lambda: T0 + timedelta(hours=3)
    data = synthetic(minutes=150, every_s=30)  # 10:00-12:30 across three hour tables
    net = net_synthetic(minutes=150, every_s=60)
    store.write(data)
    store.write_net(net)
    window = Query(start=T0, end=T0 + timedelta(hours=3))
    assert_frames_equal(sort_aggregate(store.aggregate(window, 600)), aggregate_frame(data, 600))
    store.clock = lambda: T0 + timedelta(hours=7, minutes=30)  # the raw horizon 6 h before: T0 + 1.5 h
    gone = {item.partition for item in store.expire()}
    assert gone == {"samples_2026112110", "net_samples_2026112110"}  # the whole hours past 6 hours, nothing else
    horizon = T0 + timedelta(hours=1, minutes=30)
    assert_frames_equal(store.read(window), data[data.ts >= horizon].sort_values(
        ["cluster", "host", "gpu", "field", "ts"], ignore_index=True))
    assert_frames_equal(sort_aggregate(store.aggregate(window, 60)), aggregate_frame(data, 60))
    got = store.aggregate_net("alps", 600, start=T0).sort_values(["bucket", "host", "nic", "field"], ignore_index=True)
    assert got["last"].tolist() == expected_net_aggregate(net, 600)["last"].tolist()
    assert got["first"].tolist() == expected_net_aggregate(net, 600)["first"].tolist()
    with pytest.raises(TelemetryUnavailable, match="partition_hours"):
        EmbeddedBackend(path=str(tmp_path / "other"), partition_hours=6)



def test_a_pass_rolls_up_network_hours_within_its_budget_and_keeps_the_raw_hours_it_did_not_roll(tmp_path):
    """A pass does not hold a worker for long after a large import: it rolls up the oldest hours within its budget,
    and the raw network hours it has not rolled up yet stay for the next pass (their rollups would be lost)."""
    from apps.telemetry.retention import Retention

    from .contract import expected_net_aggregate, net_synthetic

    store = EmbeddedBackend(path=str(tmp_path / "telemetry"), partition_hours=1, retention=CENTURY)
    store.clock = lambda: T0 + timedelta(hours=4)
    net = net_synthetic(minutes=180, every_s=60)  # 10:00-13:00, three hours
    store.write_net(net)
    store.retention, store.clock = Retention(0.25, 3, 14), (lambda: T0 + timedelta(hours=20))
    store.ROLL_UP_SECONDS = 0  # one hour per pass at least, then the budget is spent
    first = {item.partition for item in store.expire()}
    assert first == {"net_samples_2026112110"}  # the hour it rolled went; the two it did not stay
    second = {item.partition for item in store.expire()}
    assert second == {"net_samples_2026112111"}
    store.expire()
    got = store.aggregate_net("alps", 600, start=T0).sort_values(["bucket", "host", "nic", "field"], ignore_index=True)
    assert got["last"].tolist() == expected_net_aggregate(net, 600)["last"].tolist()  # every hour's rollups survived
