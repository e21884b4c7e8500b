"""The answer of GET .../metrics/: each series' times, steps and values, thinned evenly to a point budget (markers,
``event.*``, are few and always kept whole). Plain Python: no Django."""
from __future__ import annotations

import numpy as np
import pandas as pd

MARKER_PREFIX = "event."


def _iso(values) -> list[str]:
    return [stamp.isoformat() for stamp in pd.DatetimeIndex(values)]


def thin(count: int, budget: int) -> np.ndarray:
    """Indices of ``count`` points kept under ``budget``: evenly spaced, first and last included."""
    if count <= budget:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, budget).round().astype(int))


def series_body(frame: pd.DataFrame, max_points: int) -> dict:
    series = {}
    for name, group in frame.groupby("name", sort=True):
        keep = np.arange(len(group)) if name.startswith(MARKER_PREFIX) else thin(len(group), max_points)
        part = group.iloc[keep]
        series[name] = {"ts": _iso(part["ts"]), "step": [None if pd.isna(s) else int(s) for s in part["step"]],
                        "value": [float(v) for v in part["value"]], "points": int(len(group))}
    return {"series": series,
            "coverage": {"first": frame["ts"].min().isoformat() if len(frame) else None,
                         "last": frame["ts"].max().isoformat() if len(frame) else None,
                         "rows": int(len(frame)), "names": sorted(series)}}
