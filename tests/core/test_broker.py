"""The embedded broker (portal/broker.py): a consumer never reads a message file before it is whole.

kombu's filesystem channel creates the file, then locks and writes it; a consumer reading between the two got
an empty payload and its worker's consumer died (a CI run lost its worker that way). The race is forced here:
the consumer reads at the moment the producer has created its file but not yet written it."""
import json
import os
from queue import Empty

import pytest
from kombu import Connection
from kombu.transport import filesystem as kombu_filesystem

from portal import broker


def _channels(tmp_path, transport):
    folder = str(tmp_path)
    options = {"data_folder_in": folder, "data_folder_out": folder, "processed_folder": str(tmp_path / "done")}
    (tmp_path / "done").mkdir(exist_ok=True)
    connection = Connection(transport=transport, transport_options=options)
    return connection, connection.default_channel


def test_kombus_own_channel_hands_a_consumer_an_empty_file(tmp_path, monkeypatch):
    connection, channel = _channels(tmp_path, kombu_filesystem.Transport)
    seen = []
    real_lock = kombu_filesystem.lock

    def lock_then_consume(handle, flags):  # the producer created its file; a consumer comes now
        try:
            seen.append(channel._get("jobs"))
        except Exception as exc:  # noqa: BLE001 - what the worker's consumer died of
            seen.append(exc)
        return real_lock(handle, flags)

    monkeypatch.setattr(kombu_filesystem, "lock", lock_then_consume)
    channel._put("jobs", {"task": "core.refresh_job"})
    assert len(seen) == 1 and isinstance(seen[0], json.JSONDecodeError)
    connection.release()


def test_our_channel_shows_a_consumer_nothing_until_the_file_is_whole(tmp_path, monkeypatch):
    connection, channel = _channels(tmp_path, broker.Transport)
    seen = []
    real_replace = broker.os.replace

    def consume_then_replace(source, target):  # written in full, not yet in place: a consumer comes now
        try:
            seen.append(channel._get("jobs"))
        except Empty:
            seen.append("empty")
        return real_replace(source, target)

    monkeypatch.setattr(broker.os, "replace", consume_then_replace)
    channel._put("jobs", {"task": "core.refresh_job"})
    assert seen == ["empty"]
    assert channel._get("jobs") == {"task": "core.refresh_job"}
    with pytest.raises(Empty):
        channel._get("jobs")
    assert not list(tmp_path.glob("*.part"))
    connection.release()


def test_the_filesystem_broker_url_uses_our_transport():
    import portal.celery  # noqa: F401 - installs it, as in every process

    with Connection("filesystem://") as connection:
        assert isinstance(connection.transport, broker.Transport)


def _message(channel, queue: str, task_id: str) -> dict:
    payload = {"body": "[]", "headers": {"id": task_id, "task": "core.refresh_job"},
               "properties": {"delivery_info": {"exchange": "", "routing_key": queue}}}
    channel._inplace_augment_message(payload, "", queue)
    channel._put(queue, payload)
    return payload


def test_a_message_held_by_a_consumer_that_died_goes_back_to_the_queue_once(tmp_path, monkeypatch):
    """Issue 33 finding 4: kombu's channel deleted a message file when a worker took it, so a worker killed
    before its acknowledgement lost the task. Ours keeps it in the taker's locked folder: while the taker lives
    nobody else gets it; once it is gone the next consumer puts it back, exactly once; an acknowledged one never."""
    connection, channel = _channels(tmp_path, broker.Transport)
    monkeypatch.setattr(broker, "ORPHAN_SCAN_SECONDS", 0.0)
    restored = []
    broker.on_restore(lambda owner, messages: restored.append((owner, messages)))
    _message(channel, "jobs", "lost-one")
    _message(channel, "jobs", "acked-one")
    took, release = os.pipe()
    go_on, wait = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker: takes both, acknowledges one, then dies (as SIGKILL would: no shutdown code runs)
        try:
            child_connection, child_channel = _channels(tmp_path, broker.Transport)
            first = child_channel.basic_get("jobs")
            second = child_channel.basic_get("jobs")
            (first if first.headers["id"] == "acked-one" else second).ack()
            os.write(release, b"x")
            os.read(go_on, 1)
        finally:
            os._exit(0)
    os.read(took, 1)
    with pytest.raises(Empty):  # the taker lives: its message is not anyone else's
        channel._get("jobs")
    assert restored == []
    os.write(wait, b"x")
    os.waitpid(pid, 0)
    again = channel.basic_get("jobs")
    assert again.headers["id"] == "lost-one"
    assert len(restored) == 1 and restored[0][1] == [{"id": "lost-one", "task": "core.refresh_job", "queue": "jobs"}]
    assert f".{pid}." in restored[0][0]
    with pytest.raises(Empty):
        channel._get("jobs")
    again.ack()
    assert not [path for path in (tmp_path / broker.UNACKED_FOLDER).rglob("*.msg")]
    broker._restore_listeners.clear()
    connection.release()


def test_a_rejected_or_shut_down_consumers_message_is_queued_again_and_no_ack_reads_keep_no_copy(tmp_path):
    connection, channel = _channels(tmp_path, broker.Transport)
    _message(channel, "jobs", "rejected")
    message = channel.basic_get("jobs")
    message.reject(requeue=True)  # reject_on_worker_lost: a pool child died
    assert channel.basic_get("jobs").headers["id"] == "rejected"  # and the warm shutdown restores it
    channel.qos.restore_unacked_once()
    assert channel.basic_get("jobs", no_ack=True).headers["id"] == "rejected"
    with pytest.raises(Empty):
        channel._get("jobs")
    assert not [path for path in (tmp_path / broker.UNACKED_FOLDER).rglob("*.msg")]
    connection.release()
