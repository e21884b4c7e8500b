"""Saying why an httpx request did not get an answer, in the words of the error under httpx's.

Plain Python: no Django. httpx wraps the OS's and TLS's errors (ConnectionRefusedError,
socket.gaierror, ssl.SSLError ...) in its own; the clients of slurmrestd, Argo CD and the
catalogue's JSON sources name the cause a person can act on.
"""
from __future__ import annotations


def root_cause(exc: BaseException) -> BaseException:
    """The innermost error of ``exc``'s chain (``raise ... from`` first, then the one being handled)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc


def reason(exc: BaseException) -> str:
    """The OS's words for an OS error under ``exc`` ("Connection refused", "Name or service not
    known"), else the innermost error's text, else ``exc``'s own."""
    cause = root_cause(exc)
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(cause) or str(exc) or exc.__class__.__name__
