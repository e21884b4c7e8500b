"""How many GPUs a job held, and where that number comes from.

A job's start event or a Slurm record may name no GPU count; counting such a job as 0 GPU-hours while its GPUs
were scored would make usage reports lie. The count is taken, in this order, from:

- ``slurm``: the count a Slurm record or the start event gave (0 included: a CPU job holds none);
- ``tres``: Slurm's trackable resources, ``gres/gpu=N`` (``tres_alloc_str``, ``AllocTRES`` and the like);
- ``topology``: the GPUs of the job's nodes in the loaded topology (Slurm allocates GH200 nodes whole);
- ``telemetry``: the GPUs seen in the job's telemetry (those its scoring measured);
- ``unknown``: no source gives it; the job counts no GPU-hours, and reports say so instead of showing a 0.

Plain Python: no Django. Tested in tests/jobs/test_gpucount.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .slurm_json import gpus_from_tres

SOURCES = ("slurm", "tres", "topology", "telemetry", "unknown")
SOURCE_WORDS = {
    "slurm": "as Slurm reported it",
    "tres": "from Slurm's TRES (gres/gpu)",
    "topology": "the GPUs of its nodes in the topology",
    "telemetry": "the GPUs seen in its telemetry",
    "unknown": "no source gives it",
}


@dataclass(frozen=True)
class GpuCount:
    count: int | None  # None when unknown
    source: str


def gpu_count(reported: int | None, *, tres: Iterable[str | None] = (), node_gpus: int | None = None,
              telemetry_gpus: int | None = None) -> GpuCount:
    """The job's GPU count and its source (see the module's docstring for the order)."""
    if reported is not None and reported >= 0:
        return GpuCount(int(reported), "slurm")
    from_tres = gpus_from_tres(*tres)
    if from_tres is not None:
        return GpuCount(from_tres, "tres")
    if node_gpus:
        return GpuCount(int(node_gpus), "topology")
    if telemetry_gpus:
        return GpuCount(int(telemetry_gpus), "telemetry")
    return GpuCount(None, "unknown")
