"""The GPU-model provider: which GPU model (with its physical facts: clocks, temperatures, power limit) a
job ran on, for the apps below the one that keeps the per-model table.

The saturation app keeps that table (its ceilings); telemetry, below it, draws heatmaps whose ranges
come from the same facts. Saturation registers its lookup from its ``AppConfig.ready()``::

    register_gpu_model_provider(gpu_model_for_job)

``provider(job)`` returns an object with the model's attributes (see :func:`apps.core.heatmaps.facts_of`).
Without a provider :func:`gpu_model_for` answers None and the heatmaps use their default facts.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from typing import Any, Callable

_provider: Callable[[Any], Any] | None = None


def register_gpu_model_provider(provider: Callable[[Any], Any]) -> None:
    """Say how to find a job's GPU model; registering again replaces it."""
    global _provider
    _provider = provider


def gpu_model_for(job) -> Any | None:
    """The job's GPU model as the registered provider knows it, or None without one."""
    return None if _provider is None else _provider(job)
