"""The embedded profile's broker: kombu's filesystem transport, with message files that appear whole.

kombu's own ``filesystem`` channel (5.7) creates a message file, then locks and writes it; a consumer lists
the folder and moves and reads every file named ``<...>.<queue>.msg`` without taking the lock. A consumer
that comes between the creation and the write reads an empty file, fails on the JSON, and the worker's
consumer stops: its message is gone and, under supervisord, the worker restarts (seen in the test suite as a
worker that died mid-run). Here a message is written under a name no consumer matches (``....msg.part``) and
renamed into place when complete (``os.replace`` is atomic on one file system), so a consumer sees a whole
file or none.

``install()`` (called by ``portal/celery.py`` in every process) makes the ``filesystem://`` broker URL use
this transport; nothing else changes (same folders, same file names, same options).
"""
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
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
