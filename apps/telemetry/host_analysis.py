"""What a node's host samples say about its memory: page cache held in GPU memory, memory pressure, swapping.

* ``page_cache_in_gpu(frame, threshold_bytes)``: on coherent-memory nodes (GH200) the page cache can
  occupy GPU memory (``host_gpu_page_cache`` per ``gpuN`` domain, ``apps/telemetry/hostfields.py``): a
  driver defect once left file caches there and ranks ran out of memory. Each (host, GPU) whose largest
  reading in the window is ``threshold_bytes`` or more gives "page cache holds 23 GB of GPU memory on
  nid001234 GPU 1", with ``phase`` "before the job" or "during the job" when the caller says which window.
* ``memory_pressure(frame)``: a node whose tasks stalled on memory (PSI ``host_mem_pressure``) at least
  ``PRESSURE`` (10 %) of some 10 s, or that swapped out pages during the window (``host_swap_out_pages``
  grew), gives "host memory pressure on nid001234: tasks stalled on memory 12 % of the time, 2.1 GB
  swapped out".

Frames are ``HOST_COLUMNS`` (``backends.base``: ts, cluster, host, domain, field, value). GB are 10^9 bytes.
Plain Python: no Django (pandas).
"""
from __future__ import annotations

import pandas as pd

PRESSURE = 0.10
PAGE_BYTES = 4096


def gigabytes(value: float) -> str:
    gb = value / 1e9
    return f"{gb:.0f} GB" if gb >= 10 else f"{gb:.1f} GB"


def page_cache_in_gpu(frame: pd.DataFrame, threshold_bytes: float, phase: str = "") -> list[dict]:
    """[{"host", "gpu", "bytes", "sentence"}] of GPUs holding at least ``threshold_bytes`` of page cache, largest first."""
    if frame is None or frame.empty:
        return []
    rows = frame[(frame["field"] == "host_gpu_page_cache") & frame["domain"].str.startswith("gpu")]
    if rows.empty:
        return []
    peaks = rows.groupby(["host", "domain"], sort=True)["value"].max()
    out = []
    for (host, domain), value in peaks.items():
        if value >= threshold_bytes:
            gpu = int(domain[3:])
            sentence = f"page cache holds {gigabytes(value)} of GPU memory on {host} GPU {gpu}"
            out.append({"host": host, "gpu": gpu, "bytes": float(value),
                        "sentence": sentence + (f" {phase}" if phase else "")})
    return sorted(out, key=lambda item: (-item["bytes"], item["host"], item["gpu"]))


def memory_pressure(frame: pd.DataFrame, page_bytes: int = PAGE_BYTES) -> list[dict]:
    """[{"host", "stalled", "swapped_bytes", "sentence"}] of nodes under memory pressure or swapping."""
    if frame is None or frame.empty:
        return []
    node = frame[frame["domain"] == "node"]
    out = []
    for host, rows in node.groupby("host", sort=True):
        pressure = rows.loc[rows["field"] == "host_mem_pressure", "value"]
        swaps = rows.loc[rows["field"] == "host_swap_out_pages"].sort_values("ts")["value"]
        stalled = float(pressure.max()) if len(pressure) else 0.0
        swapped = max(float(swaps.iloc[-1] - swaps.iloc[0]), 0.0) * page_bytes if len(swaps) > 1 else 0.0
        if stalled < PRESSURE and swapped <= 0:
            continue
        parts = []
        if stalled >= PRESSURE:
            parts.append(f"tasks stalled on memory {round(100 * stalled)} % of the time")
        if swapped > 0:
            parts.append(f"{gigabytes(swapped)} swapped out")
        out.append({"host": host, "stalled": stalled, "swapped_bytes": swapped,
                    "sentence": f"host memory pressure on {host}: {', '.join(parts)}"})
    return out
