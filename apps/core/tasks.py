"""Tasks every deployment needs: the readiness ping and beat's heartbeat."""
import os
import socket

from celery import shared_task

from .models import Heartbeat


@shared_task(name="core.ping", ignore_result=False)
def ping_task(nonce: str) -> dict:
    """Answer /readyz's broker round-trip, saying which process answered.

    The caller compares ``pid``/``hostname`` with its own to prove a separate worker process
    took the message off the broker (an eager call would answer with the caller's own pid).
    """
    return {"nonce": nonce, "pid": os.getpid(), "hostname": socket.gethostname()}


@shared_task(name="core.beat_heartbeat")
def beat_heartbeat_task() -> None:
    """Sent by beat on a fixed schedule; its arrival proves beat, broker and worker all run."""
    Heartbeat.beat("beat", worker_pid=os.getpid())
