"""The embedded profile's broker: kombu's filesystem transport, with message files that appear whole.

kombu's own ``filesystem`` channel (5.7) creates a message file, then locks and writes it; a consumer lists
the folder and moves and reads every file named ``<...>.<queue>.msg`` without taking the lock. A consumer
that comes between the creation and the write reads an empty file, fails on the JSON, and the worker's
consumer stops: its message is gone and, under supervisord, the worker restarts (seen in the test suite as a
worker that died mid-run). Here a message is written under a name no consumer matches (``....msg.part``) and
renamed into place when complete (``os.replace`` is atomic on one file system), so a consumer sees a whole
file or none.

A message a worker took is kept until the worker acknowledges it (issue 33: kombu deleted the file when the
worker's main process took it, so a worker killed with SIGKILL lost the task it was running, and the sweepers
found it half an hour later). The consumer moves the file into a folder of its own, ``<queue folder>/.unacked/
<host>.<pid>.<token>/``, whose ``owner.lock`` it holds with ``flock`` for as long as it lives (pool children
forked later share the lock; Celery's prefork children die with their parent, PR_SET_PDEATHSIG); the
acknowledgement deletes the file, a rejection with requeue and a warm shutdown move it back into the queue. Every
consumer of acknowledged messages looks at the other owners' folders when it starts and every
``ORPHAN_SCAN_SECONDS`` while it waits for messages: a folder whose lock it can take belongs to a worker that died,
and its messages go back into the queue (a rename: only one consumer can move a file, so each is queued once).
:func:`on_restore` tells listeners (apps/core marks the runs of those tasks as re-queued). Messages consumed
without acknowledgement (remote-control replies, broadcasts) are deleted when read, as before.

``install()`` (called by ``portal/celery.py`` in every process) makes the ``filesystem://`` broker URL use
this transport; the folders, file names and options are kombu's (plus ``unacked_folder``, by default
``<data_folder_in>/.unacked``).
"""
import fcntl
import logging
import os
import socket
import threading
import uuid
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".part"
UNACKED_FOLDER = ".unacked"
LOCK_NAME = "owner.lock"
#: How often a waiting consumer looks for the messages of workers that died (and once when it starts).
ORPHAN_SCAN_SECONDS = 2.0

# Messages this process took and has not acknowledged yet: delivery tag -> (file in its own folder, queue folder).
_taken: dict[str, tuple[str, str]] = {}
# This process's own folder under each unacked root, created when it first takes a message to acknowledge.
_owners: dict[str, "_Owner"] = {}
# Owners inherited through fork(): kept open so that the lock stays held while a child lives.
_inherited: list = []
_owner_lock = threading.Lock()
_next_scan: dict[str, float] = {}
_restore_listeners: list = []


def on_restore(listener) -> None:
    """Call ``listener(owner=<folder name: host.pid.token>, messages=[{"id", "task", "queue"}, ...])`` whenever
    this process puts back the messages of a worker that died (idempotent per listener)."""
    if listener not in _restore_listeners:
        _restore_listeners.append(listener)


class _Owner:
    """This process's folder of taken messages, locked for as long as the process (or a child) lives."""

    def __init__(self, root: str):
        os.makedirs(root, exist_ok=True)
        self.name = f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        temporary = os.path.join(root, f".{self.name}")  # not visible to scanners until it is locked
        os.makedirs(temporary)
        self.lock = open(os.path.join(temporary, LOCK_NAME), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.path = os.path.join(root, self.name)
        os.rename(temporary, self.path)


def _own_folder(root: str) -> "_Owner":
    with _owner_lock:
        owner = _owners.get(root)
        if owner is None or not os.path.isdir(owner.path):
            owner = _owners[root] = _Owner(root)
        return owner


def _after_fork_in_child() -> None:
    _inherited.extend(_owners.values())
    _owners.clear()
    _taken.clear()
    _next_scan.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _drop(delivery_tag) -> None:
    """The message was acknowledged (or rejected for good): delete its kept copy."""
    taken = _taken.pop(delivery_tag, None)
    if taken:
        try:
            os.unlink(taken[0])
        except FileNotFoundError:
            pass


def _put_back(delivery_tag) -> bool:
    """Move a taken message back into its queue folder, unchanged; False when this process holds no copy."""
    taken = _taken.pop(delivery_tag, None)
    if not taken:
        return False
    path, folder = taken
    try:
        os.rename(path, os.path.join(folder, os.path.basename(path)))
    except OSError:
        return False
    return True


def restore_orphans(root: str, queue_folder: str) -> list[dict]:
    """Put back into ``queue_folder`` the messages held by workers that are gone (their folder's lock is free).
    Returns what was put back."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    own = _owners.get(root)
    restored = []
    for name in names:
        if name.startswith(".") or (own is not None and name == own.name):
            continue
        folder = os.path.join(root, name)
        try:
            descriptor = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR)
        except OSError:  # another consumer emptied and removed it just now
            continue
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its worker, or a child of it, is alive
                continue
            messages = []
            for filename in sorted(os.listdir(folder)):
                if not filename.endswith(".msg"):
                    continue
                path = os.path.join(folder, filename)
                try:
                    with open(path, "rb") as handle:
                        headers = loads(bytes_to_str(handle.read())).get("headers") or {}
                except (OSError, ValueError):
                    headers = {}
                try:
                    os.rename(path, os.path.join(queue_folder, filename))
                except OSError:
                    continue
                messages.append({"id": headers.get("id"), "task": headers.get("task"),
                                 "queue": filename.partition(".")[2][:-len(".msg")]})
            for leftover in os.listdir(folder):
                try:
                    os.unlink(os.path.join(folder, leftover))
                except OSError:
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass
        finally:
            os.close(descriptor)
        if messages:
            logger.warning("The worker %s died holding %d message(s) (%s): they are back in the queue", name,
                           len(messages), ", ".join(f"{m['task']}[{m['id']}]" for m in messages))
            restored.extend(messages)
            for listener in list(_restore_listeners):
                try:
                    listener(owner=name, messages=messages)
                except Exception:  # noqa: BLE001 - a listener never stops the consumer
                    logger.exception("restore listener %r failed", listener)
    return restored


class QoS(virtual.QoS):
    """kombu's in-memory QoS, plus the copy on disk of each taken message (see the module's docstring)."""

    def ack(self, delivery_tag):
        super().ack(delivery_tag)
        _drop(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if requeue and _put_back(delivery_tag):
            self._quick_ack(delivery_tag)
            return
        super().reject(delivery_tag, requeue=requeue)
        _drop(delivery_tag)

    def restore_unacked(self):
        self._flush()
        for delivery_tag in list(self._delivered):
            if _put_back(delivery_tag):
                self._delivered.pop(delivery_tag, None)
        return super().restore_unacked()


class Channel(filesystem.Channel):
    QoS = QoS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._no_ack_queues: set[str] = set()

    @property
    def unacked_folder(self) -> str:
        return self.transport_options.get("unacked_folder") or os.path.join(self.data_folder_in, UNACKED_FOLDER)

    def basic_consume(self, queue, no_ack, callback, consumer_tag, **kwargs):
        if no_ack:
            self._no_ack_queues.add(queue)
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_get(self, queue, no_ack=False, **kwargs):
        message = super().basic_get(queue, no_ack=no_ack, **kwargs)
        if message is not None and no_ack:
            _drop(message.delivery_tag)
        return message

    def _get(self, queue):
        """Take the next message of ``queue``: moved into this process's own folder until it is acknowledged."""
        if queue in self._no_ack_queues:
            return super()._get(queue)
        root = self.unacked_folder
        now = monotonic()
        if now >= _next_scan.get(root, 0.0):
            _next_scan[root] = now + ORPHAN_SCAN_SECONDS
            restore_orphans(root, self.data_folder_in)
        wanted = f"{queue}.msg"
        owner = None
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != wanted:
                continue
            owner = owner or _own_folder(root)
            taken = os.path.join(owner.path, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), taken)
            except OSError:  # another consumer took it
                continue
            try:
                with open(taken, "rb") as handle:
                    payload = loads(bytes_to_str(handle.read()))
            except (OSError, ValueError) as exc:
                os.unlink(taken)
                raise ChannelError(f"Cannot read file {filename!r} from queue.") from exc
            delivery_tag = (payload.get("properties") or {}).get("delivery_tag") if isinstance(payload, dict) else None
            if delivery_tag is None:  # not a kombu message: nothing will acknowledge it
                os.unlink(taken)
            else:
                _taken[delivery_tag] = (taken, self.data_folder_in)
            return payload
        raise Empty()

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: written in full under a name consumers skip, then renamed."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def install() -> None:
    """Route ``filesystem://`` to :class:`Transport` (idempotent)."""
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
