"""Jobs side by side: which of their facts differ, and how throughput scales across runs of one model.

Plain Python: no Django. ``selectors.job_compare`` builds one plain dict per job and asks these functions
which columns to highlight and what the scaling view shows.

Scaling efficiency, both kinds measured the same way: a run's tokens/s per GPU over the smallest run's
(the baseline: fewest GPUs; among equals the first given).

* **strong scaling**: the run has the same global batch as the baseline, so the same work per iteration is
  split over more GPUs. Ideal: tokens/s grows with the GPU count; efficiency = speedup / (gpus / base gpus),
  which is the ratio of tokens/s per GPU.
* **weak scaling**: the global batch grows with the GPUs (work per GPU kept). Ideal: tokens/s per GPU stays
  the same; efficiency = tokens/s per GPU / the baseline's.

Example: 32 GPUs at 1,000 tokens/s/GPU (32,000 tokens/s) and 512 GPUs at 800 tokens/s/GPU (409,600 tokens/s):
speedup 12.8 of an ideal 16, efficiency 0.8.
"""
from __future__ import annotations

import math
from typing import Hashable, Iterable

__all__ = ["differences", "scaling"]


def _same(a, b, rel_tol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0) or a == b
    return a == b


def differences(rows: list[dict], keys: Iterable[Hashable], *, rel_tol: float = 1e-9) -> dict:
    """``{key: True when the rows do not all have the same value}`` for each key.

    A key missing from a row counts as None (so a value in one row and none in another differs); numbers
    are equal within ``rel_tol`` (1 and 1.0 are the same; True is not 1); lists and dicts by equality. With
    fewer than two rows nothing differs."""
    keys = list(keys)
    if len(rows) < 2:
        return {key: False for key in keys}
    result = {}
    for key in keys:
        first = rows[0].get(key)
        result[key] = any(not _same(first, row.get(key), rel_tol) for row in rows[1:])
    return result


def _positive(run: dict, index: int, name: str, *, whole: bool) -> float | int | None:
    value = run.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"scaling: run {index + 1} has {name} {value!r}, not a positive number")
    if whole and value != int(value):
        raise ValueError(f"scaling: run {index + 1} has {name} {value!r}, not a whole number")
    return int(value) if whole else float(value)


def scaling(runs: list[dict]) -> list[dict]:
    """Each run (a dict with ``gpus``, ``tokens_per_s``, ``global_batch``; other keys are kept) with
    ``tokens_per_s_per_gpu``, ``speedup`` (tokens/s over the baseline's), ``ideal_speedup`` (gpus over the
    baseline's), ``efficiency`` (tokens/s per GPU over the baseline's) and ``kind``: "baseline" for the
    baseline, "strong" when its global batch equals the baseline's, "weak" when it differs, None when either
    is unknown. Sorted by GPU count (stable). A run without tokens_per_s gets None for the numbers; the
    baseline is the smallest run that has one. Raises ValueError naming the run (1-based, in the order given)
    for a missing or non-positive gpus and for a non-positive tokens_per_s or global_batch."""
    checked = []
    for index, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ValueError(f"scaling: run {index + 1} is {type(run).__name__}, not an object")
        gpus = _positive(run, index, "gpus", whole=True)
        if gpus is None:
            raise ValueError(f"scaling: run {index + 1} has no gpus")
        checked.append((gpus, _positive(run, index, "tokens_per_s", whole=False),
                        _positive(run, index, "global_batch", whole=True), index, run))
    checked.sort(key=lambda item: (item[0], item[3]))
    base = next((item for item in checked if item[1] is not None), None)
    result = []
    for gpus, tokens_per_s, global_batch, index, run in checked:
        out = dict(run)
        out["tokens_per_s_per_gpu"] = tokens_per_s / gpus if tokens_per_s is not None else None
        out["ideal_speedup"] = gpus / base[0] if base is not None else None
        if base is None or tokens_per_s is None:
            out.update(speedup=None, efficiency=None, kind=None)
        elif base[3] == index:
            out.update(speedup=1.0, efficiency=1.0, kind="baseline")
        else:
            out["speedup"] = tokens_per_s / base[1]
            out["efficiency"] = out["tokens_per_s_per_gpu"] / (base[1] / base[0])
            if global_batch is None or base[2] is None:
                out["kind"] = None
            else:
                out["kind"] = "strong" if global_batch == base[2] else "weak"
        result.append(out)
    return result
