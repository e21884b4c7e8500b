"""GPU-hours lost: what a job's allocation wasted, the one rule the system page, the staff triage inbox, the
usage reports and the notifications share.

A GPU-hour is lost in proportion to how far the GPU stayed from saturation: ``hours × (1 − S)`` per GPU,
with ``S`` the GPU's saturation score (0–100 in the saturation app's records, 0–1 here after dividing).
An idle GPU (busy less than ``IDLE_BUSY`` of the time, the scoring's rule) counts whole: ``hours``.
A GPU without a score (no profiling data, or a GPU that reports utilisation only) loses nothing known:
it is counted in ``unknown_gpus`` and never guessed.

Plain Python: no Django. Tested in tests/saturation/test_waste.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from apps.core.numbers import finite

IDLE_BUSY = 0.05  # apps.saturation.scoring: a GPU busy less than this share of the time is idle
# A running job is "wasteful" (triage, notifications) when its score is under this, or when at least this
# share of its GPUs is idle. Settings WASTE_SCORE_BELOW and WASTE_IDLE_SHARE override them.
WASTE_SCORE_BELOW = 30.0
WASTE_IDLE_SHARE = 0.25


@dataclass(frozen=True)
class Waste:
    gpu_hours: float  # the allocation over the hours given: GPUs × hours
    lost: float  # GPU-hours lost (idle GPUs whole, the others × (1 − S))
    idle_gpu_hours: float  # the part of ``lost`` from idle GPUs
    unknown_gpus: int  # GPUs without a score: not counted in ``lost``

    @property
    def share(self) -> float | None:
        """Lost over the known allocation (None when nothing is known)."""
        return self.lost / self.gpu_hours if self.gpu_hours and not self.unknown_gpus else None


def gpu_hours_lost(hours: float, gpus: int, *, score: float | None, idle_gpus: int = 0,
                   per_gpu: Iterable[Mapping] | None = None) -> Waste:
    """What ``gpus`` GPUs held for ``hours`` hours lost.

    ``per_gpu`` (the saturation record's rows: ``score`` 0–100, ``busy`` 0–1) decides GPU by GPU when
    given and not empty; otherwise the job's ``score`` (0–100, a mean over all its GPUs, idle ones included)
    and ``idle_gpus`` do: the idle GPUs count whole and the busy ones lose ``1 − S_busy``, where ``S_busy``
    is the job's score spread over its busy GPUs (an idle GPU scores about 0).
    """
    hours = max(0.0, float(hours or 0.0))
    gpus = max(0, int(gpus or 0))
    rows = list(per_gpu or [])
    if rows:
        lost = idle = 0.0
        unknown = 0
        for row in rows:
            busy, s = finite(row.get("busy")), finite(row.get("score"))
            if busy is not None and busy < IDLE_BUSY:
                idle += hours
            elif s is None:
                unknown += 1
            else:
                lost += hours * (1.0 - min(max(s / 100.0, 0.0), 1.0))
        unknown += max(0, gpus - len(rows))  # GPUs the job holds that never reported
        return Waste(gpu_hours=gpus * hours, lost=lost + idle, idle_gpu_hours=idle, unknown_gpus=unknown)
    idle_gpus = min(max(0, int(idle_gpus or 0)), gpus)
    s = finite(score)
    idle = idle_gpus * hours
    busy_gpus = gpus - idle_gpus
    if s is None:
        return Waste(gpu_hours=gpus * hours, lost=idle, idle_gpu_hours=idle, unknown_gpus=busy_gpus)
    s_busy = min(max((s / 100.0) * gpus / busy_gpus, 0.0), 1.0) if busy_gpus else 0.0
    return Waste(gpu_hours=gpus * hours, lost=idle + busy_gpus * hours * (1.0 - s_busy), idle_gpu_hours=idle,
                 unknown_gpus=0)


def is_wasteful(*, score: float | None, gpus: int, idle_gpus: int, score_below: float = WASTE_SCORE_BELOW,
                idle_share: float = WASTE_IDLE_SHARE) -> bool:
    """Whether a running job wastes its GPUs: scored under ``score_below``, or ``idle_share`` of its GPUs idle.
    A job without GPUs has nothing to waste."""
    if not gpus:
        return False
    if idle_gpus and idle_gpus / gpus >= idle_share:
        return True
    s = finite(score)
    return s is not None and s < score_below
