"""The embedded broker (portal/broker.py): a consumer never reads a message file before it is whole.

kombu's filesystem channel creates the file, then locks and writes it; a consumer reading between the two got
an empty payload and its worker's consumer died (a CI run lost its worker that way). The race is forced here:
the consumer reads at the moment the producer has created its file but not yet written it."""
import json
from queue import Empty

import pytest
from kombu import Connection
from kombu.transport import filesystem as kombu_filesystem

from portal import broker


def _channels(tmp_path, transport):
    folder = str(tmp_path)
    options = {"data_folder_in": folder, "data_folder_out": folder, "processed_folder": str(tmp_path / "done")}
    (tmp_path / "done").mkdir()
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
