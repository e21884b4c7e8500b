"""Belvedere's client for users: ``log()`` application metrics from the training loop, and the ``belvedere report``
command for a job's report from a login node. Standard library only."""
from .metrics import configure, event, flush, log, stats

__all__ = ["configure", "event", "flush", "log", "stats"]
__version__ = "0.1.0"
