"""A job's saturation product: per-sample scores reduced to what pages show.

``score_samples`` turns a job's raw telemetry (the canonical long table) into per-GPU arrays on the
job's sample grid, scores every sample (``scoring.score``), summarises the steady state
(``scoring.summarize``) and bins S, its components and the explanations into at most ``bins`` time
columns for heatmaps and bands. ``SaturationCube`` is saved as ``.npz``; a page only loads it.
Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .scoring import DEFAULT_MODEL, GpuModel, JobSummary, Scores, score, summarize

METRICS = ("S", "C", "M", "L", "busy", "clock_factor", "S_busy")
FIELDS_NEEDED = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078, 203, 100, 113, 112,
                 150, 155, 156)


@dataclass
class SaturationCube:
    hosts: np.ndarray  # (gpus,)
    gpus: np.ndarray  # (gpus,)
    bin_starts: np.ndarray  # (bins,) datetime64[ns]
    bin_seconds: float
    values: dict  # metric -> (gpus, bins) float32 means
    warmup_end: np.datetime64 | None  # first sample of the steady state
    steady_end: np.datetime64 | None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npz")
        np.savez_compressed(temporary, hosts=self.hosts.astype("U"), gpus=self.gpus, bin_seconds=np.array(self.bin_seconds),
                            bin_starts=self.bin_starts.astype("datetime64[ns]").astype("int64"),
                            warmup_end=np.array(-1 if self.warmup_end is None else self.warmup_end.astype("datetime64[ns]").astype("int64")),
                            steady_end=np.array(-1 if self.steady_end is None else self.steady_end.astype("datetime64[ns]").astype("int64")),
                            **{f"metric_{name}": array for name, array in self.values.items()})
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path) -> "SaturationCube":
        with np.load(path, allow_pickle=False) as data:
            stamp = lambda key: None if int(data[key]) < 0 else np.datetime64(int(data[key]), "ns")  # noqa: E731
            return cls(hosts=data["hosts"].astype(object), gpus=data["gpus"], bin_seconds=float(data["bin_seconds"]),
                       bin_starts=data["bin_starts"].astype("datetime64[ns]"),
                       values={key[len("metric_"):]: data[key] for key in data.files if key.startswith("metric_")},
                       warmup_end=stamp("warmup_end"), steady_end=stamp("steady_end"))


@dataclass
class Grid:
    """The job's samples as (gpus, times) arrays per field."""

    hosts: np.ndarray
    gpus: np.ndarray
    times: np.ndarray  # (times,) datetime64[ns]
    values: dict  # field id -> (gpus, times) float64, NaN where missing

    @property
    def interval_s(self) -> float:
        if len(self.times) < 2:
            return 10.0
        return float(np.median(np.diff(self.times.astype("int64"))) / 1e9)


def to_grid(frame: pd.DataFrame, hosts_order: list[str] | None = None) -> Grid:
    """Pivot the canonical long table onto a GPU x time grid (the union of timestamps)."""
    if frame.empty:
        return Grid(np.array([], dtype=object), np.array([], dtype="int16"), np.array([], dtype="datetime64[ns]"), {})
    order = {host: i for i, host in enumerate(hosts_order)} if hosts_order else None
    series = frame[["host", "gpu"]].drop_duplicates()
    series = series.assign(rank=series["host"].map(order).fillna(len(order)) if order else 0).sort_values(["rank", "host", "gpu"])
    row_index = pd.MultiIndex.from_frame(series[["host", "gpu"]])
    rows = row_index.get_indexer(pd.MultiIndex.from_frame(frame[["host", "gpu"]]))
    ts = frame["ts"].dt.as_unit("ns").astype("int64").to_numpy()
    times, columns = np.unique(ts, return_inverse=True)
    values = {}
    fields = frame["field"].to_numpy()
    raw = frame["value"].to_numpy()
    for field_id in np.unique(fields):
        mask = fields == field_id
        grid = np.full((len(series), len(times)), np.nan)
        grid[rows[mask], columns[mask]] = raw[mask]
        values[int(field_id)] = grid
    return Grid(series["host"].to_numpy(object), series["gpu"].to_numpy("int16"), times.astype("datetime64[ns]"), values)


def _bin_means(array: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean of each column range [edges[i], edges[i+1]) ignoring NaN, for every row."""
    valid = np.isfinite(array)
    filled = np.where(valid, array, 0.0)
    sums = np.add.reduceat(filled, edges[:-1], axis=1)
    counts = np.add.reduceat(valid.astype(np.int32), edges[:-1], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).astype("float32")


def score_samples(frame: pd.DataFrame, *, hosts_order: list[str] | None = None, model: GpuModel = DEFAULT_MODEL,
                  bins: int = 300) -> tuple[SaturationCube, JobSummary, Scores, Grid]:
    grid = to_grid(frame, hosts_order)
    if not len(grid.times):
        raise ValueError("no samples to score")
    scores = score(grid.values, model)
    summary = summarize(scores, interval_s=grid.interval_s, power_w=grid.values.get(155))
    count = len(grid.times)
    per_bin = max(1, int(np.ceil(count / bins)))
    edges = np.arange(0, count + per_bin, per_bin)
    edges[-1] = count
    edges = np.unique(edges)
    metrics = {"S": scores.S, "C": scores.C, "M": scores.M, "L": scores.L, "busy": scores.busy,
               "clock_factor": scores.clock_factor, "S_busy": scores.S_busy}
    window = summary.window
    cube = SaturationCube(
        hosts=grid.hosts, gpus=grid.gpus, bin_starts=grid.times[edges[:-1]], bin_seconds=per_bin * grid.interval_s,
        values={name: _bin_means(array, edges) for name, array in metrics.items()},
        warmup_end=grid.times[window.start] if window.start < count else None,
        steady_end=grid.times[window.stop - 1] if window.stop > 0 else None)
    return cube, summary, scores, grid
