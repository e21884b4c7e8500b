"""GPUs whose telemetry stops while the job runs on: which ones, and from when.

A job's data can be "complete" by its first and last sample (some GPU reported until the end) while most of
its GPUs fell silent long before (issue 35: three quarters of job 1200412's GPUs sent nothing for its last
80 minutes, and its page said "Nothing needs your attention"). :func:`silent_gpus` reads the scored columns
(every GPU × every time column, NaN where the GPU sent no sample) and names the GPUs whose last sample is
well before the last sample of the job's other GPUs. GPUs that never reported are not here: the telemetry
panel counts them. Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Arrays that say nothing about whether a sample arrived (zero or -1 where none did).
_NOT_PRESENCE = ("limiter", "power_capped", "thermal")


@dataclass(frozen=True)
class SilentGpu:
    row: int  # the GPU's row in the scored columns
    host: str
    gpu: int
    last_ns: int  # end of the last column holding one of its samples (epoch ns)


def tolerance_s(step_s: float) -> float:
    """Silence shorter than this is a late batch or a gap, not a GPU that stopped: two columns, at least 5 min."""
    return max(2 * float(step_s), 300.0)


def silent_gpus(hosts, gpus, arrays: dict, origin_ns: int, step_s: float) -> list[SilentGpu]:
    """GPUs that reported and then stopped at least :func:`tolerance_s` before the job's last reporting GPU.

    ``arrays``: name -> (GPUs, columns) scored columns; ``origin_ns``: start of column 0; ``step_s``: column width."""
    present = None
    for name, values in arrays.items():
        if name in _NOT_PRESENCE:
            continue
        finite = np.isfinite(np.asarray(values, dtype="float64"))
        present = finite if present is None else (present | finite)
    if present is None or present.size == 0 or not present.any():
        return []
    columns = present.shape[1]
    last_column = np.where(present.any(axis=1), columns - 1 - np.argmax(present[:, ::-1], axis=1), -1)
    step_ns = int(round(float(step_s) * 1e9))
    last_ns = int(origin_ns) + (last_column + 1) * step_ns  # the end of each GPU's last column with data
    reference = int(last_ns[last_column >= 0].max())
    cutoff = reference - int(tolerance_s(step_s) * 1e9)
    rows = np.flatnonzero((last_column >= 0) & (last_ns <= cutoff))
    return sorted((SilentGpu(int(row), str(hosts[row]), int(gpus[row]), int(last_ns[row])) for row in rows),
                  key=lambda item: (item.last_ns, item.row))
