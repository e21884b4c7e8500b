"""The job-product refresher registry: how apps keep their per-job products up to date as samples arrive.

Ingestion (a lower app) knows which jobs a batch of samples touches but not which products hang off
a job; the apps that build products register a refresher from their ``AppConfig.ready()``::

    register_job_refresher(JobRefresher(name="saturation", order=20,
                                        refresh="apps.saturation.services.job_saturation_update"))

``refresh`` is the dotted path of a function ``refresh(job, report) -> None`` that brings that
app's product of the job up to date *incrementally* (only what is new since its last run; a full
rebuild only when its own rules say so) and is idempotent. Refreshers run in ``order`` (lower first:
the telemetry cube before the saturation score) inside one debounced task per job (see the live
refresh in :mod:`apps.core.tasks`).

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from .registry import OrderedRegistry


@dataclass(frozen=True)
class JobRefresher:
    name: str  # short key, shown in progress messages ("saturation")
    order: int  # lower runs first
    refresh: str  # dotted path of refresh(job, report) -> None


_refreshers: OrderedRegistry[JobRefresher] = OrderedRegistry(key=lambda refresher: refresher.name)


def register_job_refresher(refresher: JobRefresher) -> JobRefresher:
    """Register (or replace, by name) a refresher; returns it."""
    return _refreshers.add(refresher)


def job_refreshers() -> list[JobRefresher]:
    """The registered refreshers, in the order they run."""
    return _refreshers.entries()
