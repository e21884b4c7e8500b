"""The embedded (DuckDB) telemetry store: the shared contract, plus what only it has to get right."""
import multiprocessing
from datetime import timedelta

import pytest

from apps.telemetry.backends.base import Query, TelemetryUnavailable
from apps.telemetry.backends.embedded import EmbeddedBackend

from .contract import T0, BackendContract, app_synthetic, assert_app_frames_equal, sorted_app, synthetic


@pytest.fixture
def backend(tmp_path):
    store = EmbeddedBackend(path=str(tmp_path / "telemetry"))
    yield store
    store.close()


class TestEmbeddedContract(BackendContract):
    pass


def _write_in_another_process(path, seed, queue):
    store = EmbeddedBackend(path=path, lock_timeout=60)
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
    out = EmbeddedBackend(path=path).read(Query(start=T0, end=T0 + timedelta(hours=1)))
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
    old = EmbeddedBackend(path=path)
    samples = synthetic(minutes=2)
    old.write(samples)
    connection = duckdb.connect(str(old.file))
    connection.execute("DROP TABLE app_series")
    tables = {row[0] for row in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    connection.close()
    assert "app_series" not in tables and "samples" in tables

    store = EmbeddedBackend(path=path)  # a new process's first open
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
