"""The hook through which a higher app says why a job hung (the Flight Recorder's verdict of a stuck collective),
for apps that judge a job's end (apps.campaigns' failures) without importing it.

An app that can tell registers from its ``AppConfig.ready()``::

    register_hang_verdict_source("flightrec", lambda job: "rank 17 on nid000123 never entered allreduce #4411")

``fn(job)`` returns one sentence, or None when it has no verdict for the job. :func:`hang_verdict` asks the sources
in key order and returns the first sentence. With no source registered every job has no verdict.
Plain Python: no Django.
"""
from __future__ import annotations

from typing import Any, Callable

from .registry import OrderedRegistry

_sources: OrderedRegistry = OrderedRegistry(key=lambda entry: entry[0], sort_key=lambda entry: (0, entry[0]))


def register_hang_verdict_source(key: str, fn: Callable[[Any], str | None]) -> None:
    _sources.add((key, fn))


def hang_verdict(job) -> str | None:
    for _, fn in _sources.entries():
        verdict = fn(job)
        if verdict:
            return verdict
    return None
