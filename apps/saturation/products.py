"""A job's saturation product: per-sample scores reduced to what pages show.

The job's telemetry arrives as canonical long tables, a few nodes at a time (raw samples, or a
store's bucket means with their counts). ``to_grid`` puts each part on one regular time grid —
epoch-aligned buckets of the scoring step, so nodes whose collectors sample at different moments
(and DCGM values that each carry their own microsecond timestamp) still line up — ``score_job``
scores every GPU and bucket (``scoring.score``), summarises the steady state
(``scoring.summarize``) and bins S, its components, the explanations and a few raw fields into at
most ``bins`` time columns for heatmaps, bands and straggler detection. ``SaturationCube`` is
saved as ``.npz``; a page only loads it. Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from apps.telemetry.products import choose_step

from .scoring import DEFAULT_MODEL, POWER_BITS, THERMAL_BITS, GpuModel, JobSummary, Scores, score, summarize


@dataclass(frozen=True)
class Metric:
    title: str
    unit: str  # "" for fractions of a ceiling or of time
    zmin: float | None = 0.0  # colour range of heatmaps; None: from the data
    zmax: float | None = 1.0
    scale: float = 0.001  # resolution the API sends: value = integer x scale


METRICS = {
    "S": Metric("saturation S", ""),
    "C": Metric("compute C", ""),
    "M": Metric("memory M", ""),
    "L": Metric("link L", ""),
    "S_busy": Metric("saturation while busy", ""),
    "busy": Metric("busy (utilisation)", ""),
    "clock_factor": Metric("SM clock / max", ""),
    "sm_clock": Metric("SM clock", "MHz", None, None, 1.0),
    "power": Metric("power", "W", None, None, 0.1),
    "temperature": Metric("GPU temperature", "°C", None, None, 0.1),
    "power_capped": Metric("time power-capped", ""),
    "thermal": Metric("time in thermal slowdown", ""),
}
RAW_METRICS = {"sm_clock": 100, "power": 155, "temperature": 150}  # metric -> DCGM field, binned as they come
REASONS_FIELD = 112  # clock-event reasons bitmask: read per sample, never as a bucket mean
FIELDS_NEEDED = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078, 203, 100, 113, 150, 155)
MAX_COLUMNS = 2160


def scoring_step(duration_s: float, max_columns: int = MAX_COLUMNS) -> int:
    """Seconds per scoring bucket: 10 s (the usual collector interval) until the job needs more than
    ``max_columns`` buckets, then the next friendly step (20, 30, 60 s …): a multiple of the sampling
    interval, so every bucket holds the same number of samples, and one the store keeps rollups for."""
    return choose_step(duration_s, max_buckets=max_columns)


@dataclass
class SaturationCube:
    hosts: np.ndarray  # (gpus,)
    gpus: np.ndarray  # (gpus,)
    bin_starts: np.ndarray  # (bins,) datetime64[ns]
    bin_seconds: float
    values: dict  # metric -> (gpus, bins) float32 means
    warmup_end: np.datetime64 | None  # first sample of the steady state
    steady_end: np.datetime64 | None
    # Start of the first column that was not final when this was binned (samples may still come for it and
    # later ones): the bins before it never change, so an update may keep them. None: nothing known.
    final_until: np.datetime64 | None = None

    def steady_columns(self) -> np.ndarray:
        """Boolean per bin: inside the steady-state window."""
        mask = np.ones(len(self.bin_starts), dtype=bool)
        if self.warmup_end is not None:
            mask &= self.bin_starts + np.timedelta64(int(self.bin_seconds * 1e9), "ns") > self.warmup_end
        if self.steady_end is not None:
            mask &= self.bin_starts <= self.steady_end
        return mask

    def save(self, path: Path) -> None:
        """Uncompressed ``.npz`` (a 4,096-GPU, 300-bin product is about 60 MB): zlib took 3.3 s of every save,
        more than an incremental update may cost, and a page loading one metric now reads its arrays
        without inflating them. ``load`` reads compressed products written before too."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npz")
        np.savez(temporary, hosts=self.hosts.astype("U"), gpus=self.gpus, bin_seconds=np.array(self.bin_seconds),
                            bin_starts=self.bin_starts.astype("datetime64[ns]").astype("int64"),
                            warmup_end=np.array(-1 if self.warmup_end is None else self.warmup_end.astype("datetime64[ns]").astype("int64")),
                            steady_end=np.array(-1 if self.steady_end is None else self.steady_end.astype("datetime64[ns]").astype("int64")),
                            final_until=np.array(-1 if self.final_until is None else self.final_until.astype("datetime64[ns]").astype("int64")),
                            **{f"metric_{name}": array for name, array in self.values.items()})
        temporary.replace(path)  # readers never see half a file

    @staticmethod
    def metrics_in(path: Path) -> set[str]:
        """The metrics a saved product holds (read from its index, nothing decompressed)."""
        with np.load(path, allow_pickle=False) as data:
            return {key[len("metric_"):] for key in data.files if key.startswith("metric_")}

    @classmethod
    def load(cls, path: Path, metrics: Iterable[str] | None = None) -> "SaturationCube":
        """The product at ``path``; with ``metrics``, only those arrays are decompressed."""
        wanted = None if metrics is None else set(metrics)
        with np.load(path, allow_pickle=False) as data:
            stamp = lambda key: None if int(data[key]) < 0 else np.datetime64(int(data[key]), "ns")  # noqa: E731
            values = {key[len("metric_"):]: data[key] for key in data.files
                      if key.startswith("metric_") and (wanted is None or key[len("metric_"):] in wanted)}
            return cls(hosts=data["hosts"].astype(object), gpus=data["gpus"], bin_seconds=float(data["bin_seconds"]),
                       bin_starts=data["bin_starts"].astype("datetime64[ns]"), values=values,
                       warmup_end=stamp("warmup_end"), steady_end=stamp("steady_end"),
                       final_until=stamp("final_until") if "final_until" in data.files else None)


@dataclass
class Grid:
    """Samples as (gpus, times) arrays per field; NaN where a GPU has no sample in a column."""

    hosts: np.ndarray
    gpus: np.ndarray
    times: np.ndarray  # (times,) datetime64[ns]: column starts
    values: dict  # field id -> (gpus, times) float64
    step_s: float | None = None  # None: the columns are the samples' own timestamps
    throttle: tuple[np.ndarray, np.ndarray] | None = None  # (power-capped, thermal) share of each cell's samples
    counts: np.ndarray | None = None  # (times,) raw samples in each column, every field (bucket means by their count)

    @property
    def interval_s(self) -> float:
        if self.step_s:
            return float(self.step_s)
        if len(self.times) < 2:
            return 10.0
        return float(np.median(np.diff(self.times.astype("int64"))) / 1e9)


def _columns(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps ns, values, weights) of raw samples (ts, value) or bucket means (bucket or ts, mean or
    value, and the bucket's sample count as weight)."""
    ts = frame["bucket"] if "bucket" in frame.columns else frame["ts"]
    value = frame["mean"] if "mean" in frame.columns else frame["value"]
    weight = frame["count"].to_numpy(float) if "count" in frame.columns else np.ones(len(frame))
    ts = pd.to_datetime(ts, utc=True).dt.as_unit("ns").astype("int64").to_numpy()
    return ts, value.to_numpy(float), weight


def _host_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, names): categoricals (what the stores return) without a pass over strings."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(np.int64), np.asarray(column.cat.categories, dtype=object)
    codes, names = pd.factorize(column, sort=False)
    return codes.astype(np.int64), np.asarray(names, dtype=object)


def _rows(parts: list[pd.DataFrame], hosts_order: list[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row of each sample (all parts, in order) and the (host, gpu) of each row, rows in the job's
    node order then GPU."""
    names: dict[str, int] = {}
    codes, gpus = [], []
    for part in parts:
        part_codes, part_names = _host_codes(part["host"])
        remap = np.array([names.setdefault(name, len(names)) for name in part_names], dtype=np.int64)
        codes.append(remap[part_codes] if len(part_names) else part_codes)
        gpus.append(part["gpu"].to_numpy(np.int64))
    host_code, gpu = np.concatenate(codes), np.concatenate(gpus)
    host_names = np.array(list(names), dtype=object)
    width = int(gpu.max()) + 1 if len(gpu) else 1
    keys = host_code * width + gpu
    present = np.zeros(len(host_names) * width, dtype=bool)
    present[keys] = True
    pairs = np.flatnonzero(present)
    pair_hosts, pair_gpus = host_names[pairs // width], (pairs % width).astype("int16")
    position = {host: i for i, host in enumerate(hosts_order or [])}
    unknown = len(position)
    order = sorted(range(len(pairs)), key=lambda i: (position.get(pair_hosts[i], unknown), pair_hosts[i], pair_gpus[i]))
    row_of_pair = np.empty(len(host_names) * width, dtype=np.int64)
    row_of_pair[pairs[order]] = np.arange(len(order))
    return row_of_pair[keys], pair_hosts[order], pair_gpus[order]


def to_grid(frame: pd.DataFrame | list[pd.DataFrame], hosts_order: list[str] | None = None, *, start=None,
            step_s: float | None = None, columns: int | None = None) -> Grid:
    """Put a long table (or several parts of one, e.g. bucket means and raw samples of the same GPUs)
    onto a GPU x time grid.

    With ``step_s``, columns are epoch-aligned buckets of that many seconds from the one holding
    ``start`` (``columns`` of them, else up to the last sample), and each cell is the mean of the
    samples in it (bucket means weighted by their counts). Without it, columns are the union of the
    samples' timestamps. The reasons bitmask (field 112) becomes the share of each cell's samples
    with a power-cap and with a thermal reason."""
    parts = [part for part in (frame if isinstance(frame, list) else [frame]) if part is not None and not part.empty]
    if not parts:
        return Grid(np.array([], dtype=object), np.array([], dtype="int16"), np.array([], dtype="datetime64[ns]"), {}, step_s,
                    counts=np.zeros(0))
    rows, hosts, gpus = _rows(parts, hosts_order)
    read = [_columns(part) for part in parts]
    ts, value, weight = (np.concatenate([item[i] for item in read]) for i in range(3))
    field = np.concatenate([part["field"].to_numpy(np.int64) for part in parts])
    if step_s:
        step_ns = int(round(step_s * 1e9))
        first = (int(pd.Timestamp(start).value) if start is not None else int(ts.min())) // step_ns * step_ns
        column = (ts - first) // step_ns
        count = int(columns) if columns is not None else int(column.max()) + 1
        times = (first + np.arange(count, dtype=np.int64) * step_ns).astype("datetime64[ns]")
        inside = (column >= 0) & (column < count)
        if not inside.all():
            rows, column, value, weight, field = rows[inside], column[inside], value[inside], weight[inside], field[inside]
    else:
        stamps, column = np.unique(ts, return_inverse=True)
        times, count = stamps.astype("datetime64[ns]"), len(stamps)
    shape = (len(hosts), count)
    cells = rows * count + column
    values, throttle = {}, None
    counts = np.bincount(column, weights=weight, minlength=count)[:count]
    if not len(field):
        return Grid(hosts, gpus, times, values, step_s, throttle, counts)
    order = np.argsort(field, kind="stable")  # one pass to split by field
    for chunk in np.split(order, np.flatnonzero(np.diff(field[order])) + 1):
        field_id = int(field[chunk[0]])
        if field_id == REASONS_FIELD:
            reasons = np.nan_to_num(value[chunk], nan=0.0).astype(np.int64)
            shares = [_cell_means(cells[chunk], ((reasons & bits) > 0).astype(float), weight[chunk], shape)
                      for bits in (POWER_BITS, THERMAL_BITS)]
            throttle = (shares[0], shares[1])
            continue
        values[field_id] = _cell_means(cells[chunk], value[chunk], weight[chunk], shape)
    return Grid(hosts, gpus, times, values, step_s, throttle, counts)


def _cell_means(cells: np.ndarray, value: np.ndarray, weight: np.ndarray, shape) -> np.ndarray:
    size = shape[0] * shape[1]
    sums = np.bincount(cells, weights=value * weight, minlength=size)
    counts = np.bincount(cells, weights=weight, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1e-300), np.nan).reshape(shape)


def _bin_edges(count: int, bins: int) -> np.ndarray:
    per_bin = max(1, int(np.ceil(count / bins)))
    edges = np.arange(0, count + per_bin, per_bin)
    edges[-1] = count
    return np.unique(edges)


def _bin_means(array: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean of each column range [edges[i], edges[i+1]) ignoring NaN, for every row (summed in float64
    whatever the array's type, without a float64 copy of it)."""
    valid = np.isfinite(array)
    filled = np.where(valid, array, 0.0)
    sums = np.add.reduceat(filled, edges[:-1], axis=1, dtype=np.float64)
    counts = np.add.reduceat(valid, edges[:-1], axis=1, dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).astype("float32")


@dataclass
class ScoredJob:
    hosts: np.ndarray  # (gpus,)
    gpus: np.ndarray
    times: np.ndarray  # (samples,) column starts
    interval_s: float
    scores: Scores  # (gpus, samples)
    raw: dict  # metric -> (gpus, samples): sm_clock, power, temperature
    summary: JobSummary
    cube: SaturationCube

    @property
    def samples(self) -> int:
        return int(np.isfinite(self.scores.S).sum())


_SCORE_ARRAYS = ("S", "C", "M", "L", "busy", "sm_active", "occupancy", "clock_factor", "power_capped", "thermal")
#: The full-resolution arrays a scoring keeps per GPU and column (a job's *score state*, ``state.py``).
STATE_ARRAYS = (*_SCORE_ARRAYS, "limiter", *RAW_METRICS)


def empty_columns(name: str, shape) -> np.ndarray:
    """What a GPU without samples in a column scores: no limiter (-1), no time throttled (0, as ``score``
    says of a cell without reasons), NaN for everything else."""
    if name == "limiter":
        return np.full(shape, -1, dtype="int8")
    return np.full(shape, 0.0 if name in ("power_capped", "thermal") else np.nan, dtype="float32")


@dataclass
class ScoredColumns:
    """Every GPU scored on every column of the grid, before trimming and summaries: what node blocks of a
    job and incremental updates put together (``finish_scoring`` turns it into a ``ScoredJob``)."""

    hosts: np.ndarray  # (gpus,) in the job's node order, then GPU
    gpus: np.ndarray
    times: np.ndarray  # (columns,) datetime64[ns] column starts
    interval_s: float
    arrays: dict  # STATE_ARRAYS name -> (gpus, columns): float32, limiter int8
    counts: np.ndarray  # (columns,) raw samples behind each column


def row_order(hosts: np.ndarray, gpus: np.ndarray, hosts_order: list[str] | None) -> np.ndarray:
    """Indices that put (host, gpu) rows in the job's node order (unknown hosts last, by name), then GPU."""
    position = {host: i for i, host in enumerate(hosts_order or [])}
    return np.array(sorted(range(len(hosts)), key=lambda i: (position.get(hosts[i], len(position)), hosts[i], gpus[i])),
                    dtype=np.int64)


def score_columns(frames: Iterable[pd.DataFrame | list[pd.DataFrame]], *, start=None, end=None, step_s: float | None = None,
                  hosts_order: list[str] | None = None, model: GpuModel = DEFAULT_MODEL) -> ScoredColumns:
    """Grid and score the job's samples (``frames``: any split by GPU, e.g. a few nodes each; an item may be
    a list of parts of the same GPUs) on every column between ``start`` and ``end`` — nothing trimmed, so
    the columns of separately scored windows or node blocks line up and concatenate.

    With ``step_s`` every frame lands on the same grid of buckets between ``start`` and ``end``; without
    it there must be one frame, whose own timestamps are the columns."""
    columns = None
    if step_s:
        if start is None or end is None:
            raise ValueError("scoring on a step needs the window's start and end")
        step_ns = int(round(step_s * 1e9))
        first = int(pd.Timestamp(start).value) // step_ns * step_ns
        columns = max(1, int(math.ceil((int(pd.Timestamp(end).value) - first) / step_ns)))
    parts = []
    for frame in frames:
        if frame is None or (isinstance(frame, pd.DataFrame) and frame.empty) or (isinstance(frame, list) and not frame):
            continue
        if parts and not step_s:
            raise ValueError("several frames need a scoring step to share one time grid")
        grid = to_grid(frame, hosts_order, start=start, step_s=step_s, columns=columns)
        if not len(grid.hosts):
            continue
        scores = score(grid.values, model, throttle=grid.throttle)
        arrays = {name: np.asarray(getattr(scores, name), dtype="float32") for name in _SCORE_ARRAYS}
        arrays["limiter"] = scores.limiter.astype("int8")
        for metric, field_id in RAW_METRICS.items():
            raw = grid.values.get(field_id)
            arrays[metric] = (np.full(np.shape(scores.S), np.nan, dtype="float32") if raw is None else raw.astype("float32"))
        parts.append((grid, arrays))
    if not parts:
        raise ValueError("no samples to score")
    hosts = np.concatenate([grid.hosts for grid, _ in parts])
    gpus = np.concatenate([grid.gpus for grid, _ in parts])
    order = row_order(hosts, gpus, hosts_order)
    merged = {name: np.concatenate([arrays[name] for _, arrays in parts])[order] for name in STATE_ARRAYS}
    counts = np.sum([grid.counts for grid, _ in parts], axis=0).round().astype(np.int64)
    return ScoredColumns(hosts[order], gpus[order], parts[0][0].times, parts[0][0].interval_s, merged, counts)


def finish_scoring(columns: ScoredColumns, bins: int = 300, previous: SaturationCube | None = None,
                   changed_from: int | None = None, final_columns: int | None = None) -> ScoredJob:
    """Trim the columns before the first and after the last holding any sample (a running job's future, a
    late collector), summarise the steady state and bin the product.

    ``previous`` (the product of the same GPUs before an update) and ``changed_from`` (the first column the
    update replaced, in ``columns``' coordinates): the bins wholly before that column and before the
    previous product's own ``final_until`` are taken from it when it was binned on the same edges — the
    same numbers, without reading the old columns again. ``final_columns``: how many leading columns are
    final (the product's ``final_until``)."""
    merged, times = columns.arrays, columns.times
    with_data = np.flatnonzero(np.isfinite(merged["S"]).any(axis=0) | np.isfinite(merged["busy"]).any(axis=0))
    if not len(with_data):
        raise ValueError("the samples hold none of the fields the score needs (DCGM profiling or utilisation)")
    keep = slice(int(with_data[0]), int(with_data[-1]) + 1)
    merged = {name: array[:, keep] for name, array in merged.items()}
    times = times[keep]
    interval = columns.interval_s
    scores = Scores(limiter=merged["limiter"].astype(np.int64), **{name: merged[name] for name in _SCORE_ARRAYS})
    raw = {metric: merged[metric] for metric in RAW_METRICS}
    summary = summarize(scores, interval_s=interval, power_w=raw["power"])
    count = len(times)
    edges = _bin_edges(count, bins)
    window = summary.window
    reuse = _bins_to_reuse(previous, None if changed_from is None else changed_from - keep.start, columns, times, edges, interval)
    first = int(edges[reuse])

    def part(array):
        return array[:, first:] if first else array

    tail = Scores(limiter=part(scores.limiter), **{name: part(getattr(scores, name)) for name in _SCORE_ARRAYS})
    metrics = {"S": tail.S, "C": tail.C, "M": tail.M, "L": tail.L, "S_busy": tail.S_busy, "busy": tail.busy,
               "clock_factor": tail.clock_factor, **{name: part(array) for name, array in raw.items()},
               "power_capped": tail.power_capped, "thermal": tail.thermal}
    values = {}
    for name, array in metrics.items():
        binned = _bin_means(array, edges[reuse:] - first)
        values[name] = np.concatenate([previous.values[name][:, :reuse], binned], axis=1) if reuse else binned
    final_until = None
    if final_columns is not None and len(columns.times):
        step = np.timedelta64(int(round(interval * 1e9)), "ns")
        final_until = (columns.times[final_columns] if final_columns < len(columns.times) else columns.times[-1] + step)
    cube = SaturationCube(
        hosts=columns.hosts, gpus=columns.gpus, bin_starts=times[edges[:-1]], bin_seconds=float((edges[1] - edges[0]) * interval),
        values=values, warmup_end=times[window.start] if window.start < count else None,
        steady_end=times[window.stop - 1] if window.stop > 0 else None, final_until=final_until)
    return ScoredJob(columns.hosts, columns.gpus, times, interval, scores, raw, summary, cube)


def _bins_to_reuse(previous: SaturationCube | None, changed: int | None, columns: ScoredColumns, times: np.ndarray,
                   edges: np.ndarray, interval: float) -> int:
    """How many leading bins of ``previous`` hold exactly what binning ``times`` on ``edges`` would: the
    same GPUs, start and bin width, and wholly before the first changed column ``changed``."""
    if previous is None or previous.final_until is None or changed is None or len(edges) < 2:
        return 0
    changed = min(changed, int(np.searchsorted(times, previous.final_until.astype("datetime64[ns]"))))
    if changed <= 0:
        return 0
    per = int(edges[1] - edges[0])
    same = (len(previous.bin_starts) and previous.bin_seconds == float(per * interval) and set(METRICS) <= set(previous.values)
            and len(previous.hosts) == len(columns.hosts)
            and np.array_equal(np.asarray(previous.hosts).astype(str), np.asarray(columns.hosts).astype(str))
            and np.array_equal(np.asarray(previous.gpus).astype(np.int64), np.asarray(columns.gpus).astype(np.int64)))
    if not same:
        return 0
    reuse = min(changed // per, len(previous.bin_starts), len(edges) - 2)
    starts = previous.bin_starts[:reuse].astype("datetime64[ns]")
    if reuse <= 0 or not np.array_equal(starts, times[edges[:reuse]].astype("datetime64[ns]")):
        return 0
    return int(reuse)


def score_job(frames: Iterable[pd.DataFrame | list[pd.DataFrame]], *, start=None, end=None, step_s: float | None = None,
              hosts_order: list[str] | None = None, model: GpuModel = DEFAULT_MODEL, bins: int = 300) -> ScoredJob:
    """Score a job whose samples come as ``frames`` (any split by GPU, e.g. a few nodes each; an item may
    be a list of parts of the same GPUs): ``score_columns`` then ``finish_scoring``.

    With ``step_s`` every frame lands on the same grid of buckets between ``start`` and ``end``; without
    it there must be one frame, whose own timestamps are the columns. Columns before the first and
    after the last bucket holding any sample are dropped (a running job's future, a late collector)."""
    return finish_scoring(score_columns(frames, start=start, end=end, step_s=step_s, hosts_order=hosts_order, model=model),
                          bins=bins)


def score_samples(frame: pd.DataFrame, *, hosts_order: list[str] | None = None, model: GpuModel = DEFAULT_MODEL,
                  bins: int = 300) -> ScoredJob:
    """Score one table of raw samples on their own timestamps (tests, small jobs, the terminal)."""
    return score_job([frame], hosts_order=hosts_order, model=model, bins=bins)


# ---------------------------------------------------------------------------------------------
# Serving the product: heatmap rows and columns, downloads

SORTS = ("rank", "node", "pp", "dp", "group", "score")


def heatmap_order(per_gpu: list[dict], sort: str) -> list[int]:
    """Row order of the heatmap: by rank, the job's node order, pipeline stage or data-parallel replica
    (then rank), dragonfly group (then switch and node order), or score (least saturated first).
    GPUs without the attribute come last, in node order."""
    big = 10**9

    def value(gpu, name):
        item = gpu.get(name)
        return big if item is None else item

    def switch_key(gpu):
        switch = gpu.get("switch")
        if not switch:
            return (big, big)
        group, _, index = str(switch).partition(".")
        return (int(group), int(index)) if group.isdigit() and index.isdigit() else (big, big)

    def key(i):
        gpu = per_gpu[i]
        if sort == "rank":
            return (value(gpu, "rank"), i)
        if sort in ("pp", "dp"):
            return (value(gpu, sort), value(gpu, "rank"), i)
        if sort == "group":
            return (value(gpu, "group"), switch_key(gpu), i)
        if sort == "score":
            return (value(gpu, "score"), i)
        return (i,)  # node: the job's node order

    return sorted(range(len(per_gpu)), key=key)


def _merge(matrix: np.ndarray, most: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``most`` slices along ``axis``: consecutive ones merged by NaN-aware mean. Returns the
    matrix and the first index of each merged slice."""
    count = matrix.shape[axis]
    if count <= most:
        return matrix, np.arange(count)
    edges = np.arange(0, count, int(np.ceil(count / most)))
    valid = np.isfinite(matrix)
    sums = np.add.reduceat(np.where(valid, matrix, 0.0), edges, axis=axis)
    counts = np.add.reduceat(valid.astype(np.int32), edges, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), edges


def rebin(matrix: np.ndarray, starts: np.ndarray, seconds: float, bins: int):
    """Merge adjacent time bins (NaN-aware means) so there are at most ``bins`` columns."""
    merged, edges = _merge(matrix, bins, axis=1)
    per = edges[1] - edges[0] if len(edges) > 1 else 1
    return merged, starts[edges], seconds * per


def merge_rows(matrix: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_rows`` rows: consecutive rows (in the order given) merged by NaN-aware mean.
    Returns the matrix and the first row index of each merged row."""
    return _merge(matrix, max_rows, axis=0)


def scaled_integers(matrix: np.ndarray, scale: float) -> list[list[int | None]]:
    """Rows of ``round(value / scale)`` with None where there is no value: integers are half the size of
    floats in JSON and several times faster to encode, which is what keeps a 4,096-GPU heatmap quick."""
    finite = np.isfinite(matrix)
    rows = np.where(finite, np.round(np.where(finite, matrix, 0.0) / scale), 0).astype(np.int64).tolist()
    for row in np.flatnonzero(~finite.all(axis=1)):
        rows[row] = [value if ok else None for value, ok in zip(rows[row], finite[row])]
    return rows


GPU_TABLE_COLUMNS = ("host", "gpu", "rank", "pp", "tp", "dp", "nic", "switch", "group", "score", "compute", "memory", "link",
                     "limiter", "busy", "p10", "p50", "p90", "time_high", "clock_factor", "throttled", "label", "straggler")


def gpu_table(per_gpu: list[dict]) -> pd.DataFrame:
    """The per-GPU numbers as a table (score 0-100, the rest fractions), one row per GPU."""
    frame = pd.DataFrame(per_gpu, columns=list(GPU_TABLE_COLUMNS))
    for column in ("gpu", "rank", "pp", "tp", "dp", "group"):
        frame[column] = frame[column].astype("Int64")
    frame["straggler"] = frame["straggler"].fillna("")
    return frame


def series_table(cube: SaturationCube, per_gpu: list[dict]) -> pd.DataFrame:
    """The binned product in long form: one row per GPU and time bin, one column per metric (UTC times)."""
    gpus, bins = len(cube.hosts), len(cube.bin_starts)
    ranks = pd.array([g.get("rank") for g in per_gpu] if len(per_gpu) == gpus else [None] * gpus, dtype="Int64")
    frame = pd.DataFrame({
        "time_utc": np.tile(cube.bin_starts.astype("datetime64[us]"), gpus),
        "host": np.repeat(cube.hosts.astype(object), bins),
        "gpu": np.repeat(cube.gpus.astype("int16"), bins),
        "rank": np.repeat(ranks, bins),
    })
    for name in METRICS:
        if name in cube.values:
            frame[name] = cube.values[name].reshape(-1).astype("float64")
    return frame
