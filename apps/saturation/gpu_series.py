"""Per-GPU series of one metric for a few chosen GPUs, against their peers' median and 10-90 % band.

What ClusterCockpit users expect next to a heatmap: pick GPUs (the straggler, a suspect node) and see
their lines, with the band of the GPUs they should look like. The peers are the straggler detector's
(``stragglers.peer_groups``): the GPUs at the same pipeline stage and tensor lane in the other
data-parallel replicas when the layout is known, otherwise every GPU of the job; idle GPUs (busy less
than ``stragglers.IDLE_BUSY`` in the steady state) are never peers, nor are the chosen GPUs. The band
is taken per time bin over the peers' (re)binned values, and left empty where fewer than
``stragglers.MIN_PEERS`` peers reported — the detector does not judge such bins either.

Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .products import rebin
from .stragglers import IDLE_BUSY, MIN_PEERS, peer_groups

PEER_COLUMNS = ["host", "gpu", "rank", "pp", "tp", "dp"]


@dataclass
class GpuSeries:
    times: np.ndarray  # (bins,) datetime64[ns]: bin starts
    bin_seconds: float
    values: np.ndarray  # (chosen, bins)
    median: np.ndarray  # (bins,)
    p10: np.ndarray
    p90: np.ndarray
    peers: int  # how many GPUs the band is made of
    description: str


def gpu_label(gpu: dict) -> str:
    """``nid001234:2 (rank 388)``: how a GPU is named in the series' legend."""
    rank = gpu.get("rank")
    return f"{gpu['host']}:{gpu['gpu']}" + (f" (rank {rank})" if rank is not None else "")


def idle_rows(busy: np.ndarray | None, steady: np.ndarray) -> np.ndarray:
    """GPUs whose mean busy share in the steady state is under ``IDLE_BUSY`` (as the detector decides)."""
    if busy is None or not steady.any():
        return np.zeros(0 if busy is None else busy.shape[0], dtype=bool)
    window = np.asarray(busy, dtype=float)[:, steady]
    seen = np.isfinite(window).sum(axis=1)
    with np.errstate(invalid="ignore"):
        mean = np.where(seen > 0, np.nansum(window, axis=1) / np.maximum(seen, 1), 0.0)
    return (seen > 0) & (mean < IDLE_BUSY)


def window_columns(times: np.ndarray, bin_seconds: float, start=None, end=None) -> np.ndarray:
    """Bins that overlap [start, end) (numpy datetimes or None for open ends)."""
    keep = np.ones(len(times), dtype=bool)
    width = np.timedelta64(int(round(bin_seconds * 1e9)), "ns")
    if start is not None:
        keep &= times + width > np.datetime64(start, "ns")
    if end is not None:
        keep &= times < np.datetime64(end, "ns")
    return keep


def gpu_series(values: np.ndarray, times: np.ndarray, bin_seconds: float, per_gpu: list[dict], chosen: list[int], *,
               busy: np.ndarray | None = None, steady: np.ndarray | None = None, bins: int = 300,
               start=None, end=None) -> GpuSeries:
    """The rows ``chosen`` of ``values`` (GPUs x bins of the product) inside [start, end), merged to at most
    ``bins`` columns, and the band of the first chosen GPU's peers over the same columns.

    ``per_gpu``: one dict per row (host, gpu, rank, pp, tp, dp) in the product's row order; ``busy`` and
    ``steady``: the product's busy share and steady-state columns, to leave idle GPUs out of the peers."""
    if not chosen:
        raise ValueError("choose at least one GPU")
    values = np.asarray(values, dtype=float)
    keep = window_columns(times, bin_seconds, start, end)
    steady = np.ones(len(times), dtype=bool) if steady is None else np.asarray(steady, dtype=bool)
    idle = idle_rows(busy, steady)
    if not idle.size:
        idle = np.zeros(values.shape[0], dtype=bool)
    groups, words = peer_groups(pd.DataFrame(per_gpu, columns=PEER_COLUMNS))
    first = chosen[0]
    peer_mask = (groups == groups[first]) & ~idle
    peer_mask[chosen] = False
    peers = np.flatnonzero(peer_mask)
    window = values[:, keep]
    if window.shape[1]:
        lines, starts, seconds = rebin(window[chosen], times[keep], bin_seconds, bins)
        band_rows = rebin(window[peers], times[keep], bin_seconds, bins)[0] if len(peers) else np.empty((0, lines.shape[1]))
    else:
        lines, starts, seconds = np.empty((len(chosen), 0)), times[keep], float(bin_seconds)
        band_rows = np.empty((0, 0))
    median, p10, p90 = _band(band_rows, lines.shape[1])
    return GpuSeries(times=starts, bin_seconds=float(seconds), values=lines, median=median, p10=p10, p90=p90,
                     peers=len(peers), description=_describe(per_gpu[first], words, len(peers), int(idle.sum()), len(chosen)))


def _band(rows: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    empty = np.full(columns, np.nan)
    if not rows.size:
        return empty, empty.copy(), empty.copy()
    reported = np.isfinite(rows).sum(axis=0)
    enough = reported >= MIN_PEERS
    out = []
    for q in (50, 10, 90):
        result = np.full(columns, np.nan)
        if enough.any():
            result[enough] = np.nanpercentile(rows[:, enough], q, axis=0)
        out.append(result)
    return out[0], out[1], out[2]


def _describe(gpu: dict, words: str, peers: int, idle: int, chosen: int) -> str:
    left_out = ["the GPUs shown"] if chosen > 1 else []
    if idle:
        left_out.append(f"{idle} idle GPU{'s' * (idle != 1)}")
    text = f"{peers:,} peer{'s' * (peers != 1)} of {gpu_label(gpu)} — as the straggler detector compares: {words}"
    if left_out:
        text += f"; {' and '.join(left_out)} left out"
    if peers < MIN_PEERS:
        text += f"; fewer than {MIN_PEERS} peers, so no band"
    return text


def rounded(values: np.ndarray, scale: float) -> list[float | None]:
    """Values at the metric's resolution (``scale``: 0.001 for fractions, 1 MHz, 0.1 W), None where missing."""
    digits = max(0, -int(math.floor(math.log10(scale)))) if scale > 0 else 3
    return [round(float(v), digits) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]
