"""The embedded (DuckDB) telemetry store: the shared contract, plus what only it has to get right."""
import multiprocessing
from datetime import timedelta

import pytest

from apps.telemetry.backends.base import Query, TelemetryUnavailable
from apps.telemetry.backends.embedded import EmbeddedBackend

from .contract import T0, BackendContract, synthetic


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
