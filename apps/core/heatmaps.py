"""GPU × time heatmaps reduced to what a screen shows, with colour scales that show outliers.

Any app with a GPU × time matrix (saturation's product, telemetry's job cube) turns it into the
compact answer the job page draws:

* **colour ranges** — fixed physical ranges where they exist (fractions 0–1; the SM clock from the GPU
  model's base clock to its max boost; temperature from idle to the slowdown temperature; power from 0
  to the power limit), DCGM's own numbers (fields 113, 153, 160) preferred when the data has them; any
  other quantity from the data's true minimum to its true maximum, never a percentile clip that would
  paint an outlier like its neighbours;
* a **deviation from peers** mode: each value minus the median of its peers in the same time bin, on a
  symmetric diverging range ±D (D the largest deviation, with a floor so noise does not fill it);
* **row aggregation** above ``max_rows`` rows (by node, else by pipeline stage or dragonfly group) that
  keeps, per cell, the member furthest in the quantity's bad direction *and* the members' mean, so one
  outlier GPU among thousands still shows;
* **time rebinning** to at most the requested number of columns inside an optional [start, end) window;
* a **compact encoding**: values quantised to one byte over the colour range (0..254, 255 = no data),
  row-major, base64.

Plain Python: numpy only, no Django.
"""
from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field, replace

import numpy as np

LOW, HIGH = "low", "high"
MAX_ROWS = 1024
LEVELS = 254  # codes 0..254 span [zmin, zmax]
NO_DATA = 255
VIRIDIS = "Viridis"
# Diverging colour scales for deviations: zero white, the bad side red, the good side blue.
_RED_TO_BLUE = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]
_BLUE_TO_RED = [[0.0, "#2166ac"], [0.25, "#67a9cf"], [0.5, "#f7f7f7"], [0.75, "#ef8a62"], [1.0, "#b2182b"]]


# ---------------------------------------------------------------------------------------------
# What a quantity is: its kind of range and its bad direction


@dataclass(frozen=True)
class Quantity:
    """``kind``: fraction (0–1), percent (0–100), sm_clock, temperature, power (physical ranges) or data
    (the data's own min–max); ``bad``: the direction that is a problem (LOW or HIGH)."""

    kind: str
    bad: str
    unit: str = ""


# The saturation product's metrics (apps/saturation/products.METRICS).
SATURATION_QUANTITIES = {
    "S": Quantity("fraction", LOW), "C": Quantity("fraction", LOW), "M": Quantity("fraction", LOW),
    "L": Quantity("fraction", LOW), "S_busy": Quantity("fraction", LOW), "busy": Quantity("fraction", LOW),
    "clock_factor": Quantity("fraction", LOW), "sm_clock": Quantity("sm_clock", LOW, "MHz"),
    "power": Quantity("power", LOW, "W"), "temperature": Quantity("temperature", HIGH, "°C"),
    "power_capped": Quantity("fraction", HIGH), "thermal": Quantity("fraction", HIGH),
}

# DCGM fields (ids) whose high values are the problem: temperatures, throttling time, errors.
HIGH_BAD_FIELDS = frozenset({140, 150, 112, 202, 230, 240, 241, 310, 311, 393, 394, 395, 1420, 1422, 1423, 1424})
SM_CLOCK_FIELD, MAX_SM_CLOCK_FIELD, TEMPERATURE_FIELD, TEMPERATURE_MARGIN_FIELD = 100, 113, 150, 153
POWER_FIELDS, POWER_LIMIT_FIELD = (155, 157), 160


def telemetry_quantity(field_id: int, unit: str) -> Quantity:
    """The range kind and bad direction of a DCGM field (``unit`` as the field registry gives it)."""
    bad = HIGH if field_id in HIGH_BAD_FIELDS else LOW
    if field_id == SM_CLOCK_FIELD:
        return Quantity("sm_clock", LOW, unit)
    if field_id == TEMPERATURE_FIELD:
        return Quantity("temperature", HIGH, unit)
    if field_id in POWER_FIELDS:
        return Quantity("power", LOW, unit)
    if unit == "ratio":
        return Quantity("fraction", bad, "")
    if unit == "percent":
        return Quantity("percent", bad, "%")
    return Quantity("data", bad, unit)


# ---------------------------------------------------------------------------------------------
# Physical facts of a GPU model and the ranges they give


@dataclass(frozen=True)
class ModelFacts:
    """The numbers physical ranges come from; ``sources`` says which came from the data (field ids)."""

    name: str = "GH200"
    base_sm_clock_mhz: float = 1590.0
    max_sm_clock_mhz: float = 1980.0
    idle_temp_c: float = 30.0
    slowdown_temp_c: float = 87.0
    power_limit_w: float = 700.0
    sources: dict = field(default_factory=dict)  # fact name -> "DCGM field 113" etc.


def facts_of(model) -> ModelFacts:
    """Facts from any object with the GPU model's attributes (``apps.saturation.scoring.GpuModel``); a
    missing attribute keeps the default."""
    defaults = ModelFacts()
    values = {name: getattr(model, name, None) for name in
              ("name", "base_sm_clock_mhz", "max_sm_clock_mhz", "idle_temp_c", "slowdown_temp_c", "power_limit_w")}
    return replace(defaults, **{name: value for name, value in values.items() if value is not None})


def _typical(values) -> float | None:
    """The median of the finite, positive values, or None."""
    if values is None:
        return None
    array = np.asarray(values, dtype=float)
    array = array[np.isfinite(array) & (array > 0)]
    return float(np.median(array)) if array.size else None


def with_measurements(facts: ModelFacts, *, max_sm_clock=None, temperature=None, temperature_margin=None,
                      power_limit=None) -> ModelFacts:
    """Facts with what the data says preferred: the max SM clock from DCGM field 113, the slowdown
    temperature as temperature + margin to slowdown (150 + 153, cell by cell), the power limit from 160.
    Arrays may hold NaN; a fact the data does not give keeps the model's value."""
    changes, sources = {}, dict(facts.sources)
    clock = _typical(max_sm_clock)
    if clock is not None:
        changes["max_sm_clock_mhz"], sources["max_sm_clock_mhz"] = clock, "DCGM field 113"
    if temperature is not None and temperature_margin is not None:
        with np.errstate(invalid="ignore"):
            slowdown = _typical(np.asarray(temperature, dtype=float) + np.asarray(temperature_margin, dtype=float))
        if slowdown is not None:
            changes["slowdown_temp_c"], sources["slowdown_temp_c"] = slowdown, "DCGM fields 150 + 153"
    limit = _typical(power_limit)
    if limit is not None:
        changes["power_limit_w"], sources["power_limit_w"] = limit, "DCGM field 160"
    return replace(facts, **changes, sources=sources)


def number(value: float) -> str:
    """At most three significant digits with thousands separators: 1590 -> "1,590", 82.83 -> "82.8"."""
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, 2 - magnitude)
    rounded = round(value, decimals) if decimals else round(value, -(magnitude - 2))
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _from(facts: ModelFacts, name: str) -> str:
    source = facts.sources.get(name)
    return f", {source}" if source else ""


def physical_range(kind: str, model_facts: ModelFacts, values=None) -> tuple[float, float, str]:
    """(zmin, zmax, where they come from in words) for a quantity of ``kind``. Kinds without a physical
    range ("data") span the true minimum to the true maximum of ``values`` (all of them: no clipping)."""
    facts = model_facts
    if kind == "fraction":
        return 0.0, 1.0, "fixed: a fraction, 0 to 1"
    if kind == "percent":
        return 0.0, 100.0, "fixed: 0 to 100 %"
    if kind == "sm_clock":
        low, high = facts.base_sm_clock_mhz, facts.max_sm_clock_mhz
        if not high > low:  # a measured max below the model's base clock: keep a usable range
            low = 0.8 * high
        return (float(low), float(high), f"fixed: the {facts.name}'s base clock ({number(low)} MHz) to its max boost "
                                         f"({number(high)} MHz{_from(facts, 'max_sm_clock_mhz')})")
    if kind == "temperature":
        low, high = facts.idle_temp_c, facts.slowdown_temp_c
        if not high > low:
            high = low + 1.0
        return (float(low), float(high), f"fixed: idle ({number(low)} °C) to the {facts.name}'s slowdown temperature "
                                         f"({number(high)} °C{_from(facts, 'slowdown_temp_c')})")
    if kind == "power":
        high = facts.power_limit_w if facts.power_limit_w > 0 else 700.0
        return 0.0, float(high), f"fixed: 0 to the power limit ({number(high)} W{_from(facts, 'power_limit_w')})"
    finite = np.asarray([] if values is None else values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return 0.0, 1.0, "no data"
    low, high = float(finite.min()), float(finite.max())
    if not high > low:
        pad = max(abs(low) * 0.01, 0.5)
        return low - pad, high + pad, f"the data: every value is {number(low)}"
    return low, high, f"the data's full range, {number(low)} to {number(high)} (no clipping)"


def scale_kind(kind: str) -> str:
    """How the answer names a range kind: "fraction", "physical" or "data"."""
    return "fraction" if kind in ("fraction", "percent") else "physical" if kind in ("sm_clock", "temperature", "power") else "data"


# Smallest half-width of a deviation scale: differences below these are noise, not news.
DEVIATION_FLOORS = {"fraction": 0.05, "percent": 5.0, "sm_clock": 20.0, "temperature": 2.0, "power": 20.0}


def deviation_floor(kind: str, values) -> float:
    if kind in DEVIATION_FLOORS:
        return DEVIATION_FLOORS[kind]
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return 1.0
    return max(0.02 * float(np.median(np.abs(finite))), 1e-9)


def colorscale(mode: str, bad: str):
    """Viridis for values; for deviations a diverging scale with the bad side red."""
    if mode != "deviation":
        return VIRIDIS
    return _RED_TO_BLUE if bad == LOW else _BLUE_TO_RED


# ---------------------------------------------------------------------------------------------
# Deviation from peers


def _column_medians(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(median of each column ignoring NaN, count of finite values) without all-NaN warnings."""
    finite = np.isfinite(block)
    counts = finite.sum(axis=0)
    ordered = np.sort(np.where(finite, block, np.inf), axis=0)
    columns = np.arange(block.shape[1])
    low = np.clip((counts - 1) // 2, 0, max(block.shape[0] - 1, 0))
    high = np.clip(counts // 2, 0, max(block.shape[0] - 1, 0))
    with np.errstate(invalid="ignore"):
        median = (ordered[low, columns] + ordered[high, columns]) / 2.0
    return np.where(counts > 0, median, np.nan), counts


def deviation(values, peer_groups, *, floor: float = 0.0) -> tuple[np.ndarray, float]:
    """(value minus the median of its peers in the same time bin, D): peers are the rows with the same
    id in ``peer_groups`` (the straggler detector's groups); NaN where fewer than two peers reported.
    D = the largest |deviation|, at least ``floor``: the diverging range is ±D."""
    values = np.asarray(values, dtype=float)
    groups = np.asarray(peer_groups)
    result = np.full(values.shape, np.nan)
    if values.size:
        for group in np.unique(groups):
            rows = np.flatnonzero(groups == group)
            block = values[rows]
            median, counts = _column_medians(block)
            difference = block - median
            difference[:, counts < 2] = np.nan
            result[rows] = difference
    finite = np.abs(result[np.isfinite(result)])
    limit = max(float(finite.max()) if finite.size else 0.0, floor)
    return result, (limit if limit > 0 else 1.0)


# ---------------------------------------------------------------------------------------------
# Time: a regular grid, a window, rebinning


def regular_grid(starts: np.ndarray, step_s: float, *arrays: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Bucket starts that may skip empty buckets, put onto a gapless grid of ``step_s`` (arrays: rows x
    buckets, NaN (or 0 for integer arrays) in the new columns)."""
    starts = np.asarray(starts, dtype="datetime64[ns]")
    if not len(starts):
        return starts, list(arrays)
    step = np.timedelta64(int(round(step_s * 1e9)), "ns")
    columns = ((starts - starts[0]) // step).astype(np.int64)
    count = int(columns[-1]) + 1
    full = starts[0] + np.arange(count) * step
    placed = []
    for array in arrays:
        array = np.asarray(array)
        fill = 0 if np.issubdtype(array.dtype, np.integer) else np.nan
        grid = np.full((array.shape[0], count), fill, dtype=array.dtype)
        grid[:, columns] = array
        placed.append(grid)
    return full, placed


def window_columns(starts: np.ndarray, bin_seconds: float, start=None, end=None) -> tuple[int, int]:
    """[first, last) columns whose bins overlap the window [start, end) (either end open)."""
    starts = np.asarray(starts, dtype="datetime64[ns]")
    width = np.timedelta64(int(round(bin_seconds * 1e9)), "ns")
    first, last = 0, len(starts)
    if start is not None:
        first = int(np.searchsorted(starts + width, np.datetime64(start, "ns"), side="right"))
    if end is not None:
        last = int(np.searchsorted(starts, np.datetime64(end, "ns"), side="left"))
    return first, max(first, last)


@dataclass
class Binned:
    """A GPU x time matrix with, optionally, per-cell minimum, maximum and sample counts."""

    values: np.ndarray
    starts: np.ndarray
    bin_seconds: float
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    weights: np.ndarray | None = None

    def columns(self, first: int, last: int) -> "Binned":
        cut = lambda a: None if a is None else a[:, first:last]  # noqa: E731
        return Binned(self.values[:, first:last], self.starts[first:last], self.bin_seconds, cut(self.low), cut(self.high),
                       cut(self.weights))

    def rows(self, order) -> "Binned":
        take = lambda a: None if a is None else a[order]  # noqa: E731
        return Binned(self.values[order], self.starts, self.bin_seconds, take(self.low), take(self.high), take(self.weights))


def _weights(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    finite = np.isfinite(values)
    if weights is None:
        return finite.astype(float)
    return np.where(finite, np.asarray(weights, dtype=float), 0.0)


def _reduce(ufunc, array: np.ndarray, edges: np.ndarray, axis: int) -> np.ndarray:
    """``ufunc.reduceat(array, edges, axis)``, by a reshape when every run has the same length (nodes of four
    GPUs, runs of time bins): several times faster than reduceat on large matrices."""
    count = array.shape[axis]
    if len(edges) > 1:
        width = int(edges[1] - edges[0])
        if width > 0 and count == width * len(edges) and np.array_equal(edges, np.arange(0, count, width)):
            shape = list(array.shape)
            shape[axis:axis + 1] = [len(edges), width]
            return ufunc.reduce(array.reshape(shape), axis=axis + 1)
    return ufunc.reduceat(array, edges, axis=axis)


def _weighted_means(values, weights, edges, axis):
    w = _weights(values, weights)
    sums = _reduce(np.add, np.where(w > 0, values, 0.0) * w, edges, axis)
    counts = _reduce(np.add, w, edges, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan), counts


def rebin(data: Binned, bins: int) -> Binned:
    """At most ``bins`` columns: runs of adjacent bins merged (means weighted by the sample counts when
    known, minimum of minima, maximum of maxima); NaN where no bin of a run had data."""
    count = data.values.shape[1]
    if count <= bins or count == 0:
        return data
    per = int(math.ceil(count / bins))
    edges = np.arange(0, count, per)
    values = np.asarray(data.values, dtype=float)
    means, counts = _weighted_means(values, data.weights, edges, axis=1)
    with np.errstate(invalid="ignore"):
        low = None if data.low is None else _reduce(np.fmin, np.asarray(data.low, dtype=float), edges, 1)
        high = None if data.high is None else _reduce(np.fmax, np.asarray(data.high, dtype=float), edges, 1)
    return Binned(means, data.starts[edges], data.bin_seconds * per, low, high, None if data.weights is None else counts)


def coverage(values: np.ndarray, starts: np.ndarray, bin_seconds: float) -> dict:
    """The real extent of the data: the start of the first bin and the end of the last bin holding any value."""
    filled = np.flatnonzero(np.isfinite(np.asarray(values, dtype=float)).any(axis=0)) if np.size(values) else np.array([], int)
    if not len(filled):
        return {"first": None, "last": None}
    width = np.timedelta64(int(round(bin_seconds * 1e9)), "ns")
    return {"first": iso(starts[filled[0]]), "last": iso(starts[filled[-1]] + width)}


def iso(moment) -> str | None:
    """ISO 8601 UTC with a Z, to the second."""
    if moment is None:
        return None
    return str(np.datetime_as_string(np.datetime64(moment, "s"), unit="s")) + "Z"


def warmup_shading(steady_start, first_data, window_start=None, window_end=None) -> list[dict]:
    """The warm-up as a shaded span — only where there is data before the steady state began (clipped to the window)."""
    if steady_start is None or first_data is None:
        return []
    begin, end = np.datetime64(first_data, "ns"), np.datetime64(steady_start, "ns")
    if window_start is not None:
        begin = max(begin, np.datetime64(window_start, "ns"))
    if window_end is not None:
        end = min(end, np.datetime64(window_end, "ns"))
    return [{"start": iso(begin), "end": iso(end), "label": "warm-up"}] if begin < end else []


# ---------------------------------------------------------------------------------------------
# Rows: labels, aggregation, separators

ROW_KEYS = ("host", "gpu", "rank", "pp", "dp", "tp", "group", "switch")


def gpus_words(count: int) -> str:
    return f"{count:,} GPU" + ("" if count == 1 else "s")


def row_label(row: dict) -> str:
    """``r388 nid001234:2`` when the rank is known, else ``nid001234:2``."""
    place = f"{row.get('host')}:{row.get('gpu')}"
    return f"r{row['rank']} {place}" if row.get("rank") is not None else place


def _codes(keys: list) -> np.ndarray:
    """A code per item: 0, 1, ... in order of first appearance."""
    seen: dict = {}
    return np.fromiter((seen.setdefault(key, len(seen)) for key in keys), dtype=np.int64, count=len(keys))


def row_groups(rows: list[dict], sort: str, max_rows: int = MAX_ROWS) -> tuple[np.ndarray | None, str | None]:
    """Which output row each input row (in display order) goes to, and by what, when there are more than
    ``max_rows``: by node; when even the nodes are too many, by the sort key when it is the pipeline stage or
    the dragonfly group, else by runs of consecutive nodes. (None, None) when the rows fit."""
    if len(rows) <= max_rows:
        return None, None
    nodes = _codes([row.get("host") for row in rows])
    if nodes.max() + 1 <= max_rows:
        return nodes, "node"
    if sort in ("pp", "group") and any(row.get(sort) is not None for row in rows):
        codes = _codes([row.get(sort) for row in rows])
        if codes.max() + 1 <= max_rows:
            return codes, sort
    per = int(math.ceil((nodes.max() + 1) / max_rows))
    return nodes // per, "node"


def _aggregate_label(members: list[dict], by: str) -> str:
    count = gpus_words(len(members))
    if by == "pp":
        stage = members[0].get("pp")
        return f"stage {stage} ({count})" if stage is not None else f"no stage ({count})"
    if by == "group":
        group = members[0].get("group")
        return f"group {group} ({count})" if group is not None else f"no group ({count})"
    first, last = members[0].get("host"), members[-1].get("host")
    return f"{first} ({count})" if first == last else f"{first} … {last} ({count})"


def aggregate(data: Binned, rows: list[dict], codes: np.ndarray, by: str, *, bad: str, mode: str = "value"):
    """Rows merged by ``codes``: per cell the member furthest in the bad direction (``bad`` LOW: the
    minimum — of the members' minima when known; HIGH: the maximum; deviations: the largest |value|, sign
    kept) and the members' mean (weighted by sample counts when known). Returns (z, mean, row dicts)."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    edges = np.concatenate([[0], np.flatnonzero(np.diff(sorted_codes)) + 1])
    values = np.asarray(data.values, dtype=float)[order]
    with np.errstate(invalid="ignore"):
        if mode == "deviation":
            lowest, highest = _reduce(np.fmin, values, edges, 0), _reduce(np.fmax, values, edges, 0)
            extreme = np.where(np.abs(lowest) > np.abs(highest), lowest, highest)
        elif bad == LOW:
            source = values if data.low is None else np.asarray(data.low, dtype=float)[order]
            extreme = _reduce(np.fmin, source, edges, 0)
        else:
            source = values if data.high is None else np.asarray(data.high, dtype=float)[order]
            extreme = _reduce(np.fmax, source, edges, 0)
    weights = None if data.weights is None or mode == "deviation" else np.asarray(data.weights, dtype=float)[order]
    mean, _ = _weighted_means(values, weights, edges, axis=0)
    ordered = [rows[i] for i in order]
    columns = {key: [row.get(key) for row in ordered] for key in ROW_KEYS}
    out = []
    bounds = [*edges.tolist(), len(order)]
    for first, last in zip(bounds[:-1], bounds[1:]):
        size = last - first
        row = {}
        for key, column in columns.items():
            value = column[first]
            row[key] = value if column[first:last].count(value) == size else None  # null where the members differ
        if size > 1:
            row["gpu"] = row["rank"] = None
        row["label"] = row_label(row) if size == 1 else _aggregate_label(ordered[first:last], by)
        row["members"] = size
        out.append(row)
    return extreme, mean, out


def separators(rows: list[dict], sort: str) -> list[dict]:
    """Where the pipeline stage (sort ``pp``) or the dragonfly group (sort ``group``) changes, the first
    row included: [{"row": index, "label": "stage 3"}]; empty for other sorts."""
    key, noun = {"pp": ("pp", "stage"), "group": ("group", "group")}.get(sort, (None, None))
    if key is None or all(row.get(key) is None for row in rows):
        return []
    found, previous = [], object()
    for index, row in enumerate(rows):
        value = row.get(key)
        if value != previous:
            found.append({"row": index, "label": f"{noun} {value}" if value is not None else f"no {noun}"})
            previous = value
    return found


# ---------------------------------------------------------------------------------------------
# Encoding


def encode_u8(matrix, zmin: float, zmax: float) -> str:
    """Quantise to one byte over [zmin, zmax] (0..254, values outside clipped, 255 = no data), row-major, base64."""
    array = np.asarray(matrix, dtype=float)
    finite = np.isfinite(array)
    span = zmax - zmin if zmax > zmin else 1.0
    codes = np.clip(np.rint((np.where(finite, array, zmin) - zmin) / span * LEVELS), 0, LEVELS).astype(np.uint8)
    codes[~finite] = NO_DATA
    return base64.b64encode(np.ascontiguousarray(codes).tobytes()).decode("ascii")


def decode_u8(text: str, shape: tuple[int, int], zmin: float, zmax: float) -> np.ndarray:
    """The inverse of ``encode_u8`` (to within half a step of (zmax - zmin) / 254), NaN where no data."""
    codes = np.frombuffer(base64.b64decode(text), dtype=np.uint8).reshape(shape)
    values = zmin + codes.astype(float) / LEVELS * (zmax - zmin)
    return np.where(codes == NO_DATA, np.nan, values)


# ---------------------------------------------------------------------------------------------
# The whole answer


def compact(data: Binned, rows: list[dict], *, quantity: Quantity, facts: ModelFacts, mode: str = "value",
            peer_groups=None, order=None, sort: str = "node", bins: int = 300, start=None, end=None,
            rows_mode: str = "auto", max_rows: int = MAX_ROWS) -> dict:
    """The heatmap answer's data part (everything but metric, title, unit and the app's own extras).

    ``data`` rows follow ``rows`` (one dict per GPU with ROW_KEYS); ``order`` is the display order;
    ``peer_groups`` one peer-group id per GPU (deviation mode). ``start``/``end`` (datetime64 or None)
    cut the window before rebinning to at most ``bins`` columns."""
    order = np.arange(len(rows)) if order is None else np.asarray(order, dtype=np.int64)
    extent = coverage(data.values, data.starts, data.bin_seconds)
    first, last = window_columns(data.starts, data.bin_seconds, start, end)
    shown = rebin(data.columns(first, last).rows(order), bins)
    ordered_rows = [rows[i] for i in order]
    limit = None
    if mode == "deviation":
        groups = np.zeros(len(rows), dtype=np.int64) if peer_groups is None else np.asarray(peer_groups)[order]
        values, limit = deviation(shown.values, groups, floor=deviation_floor(quantity.kind, data.values))
        shown = Binned(values, shown.starts, shown.bin_seconds)
    codes, by = row_groups(ordered_rows, sort, max_rows) if rows_mode == "auto" else (None, None)
    if codes is None:
        z, mean = np.asarray(shown.values, dtype=float), None
        out_rows = [{**{key: row.get(key) for key in ROW_KEYS}, "label": row_label(row), "members": 1} for row in ordered_rows]
    else:
        z, mean, out_rows = aggregate(shown, ordered_rows, codes, by, bad=quantity.bad, mode=mode)
    if limit is not None:
        zmin, zmax, kind = -limit, limit, "deviation"
        source = f"value minus its peers' median in each time bin, ±{number(limit)}{(' ' + quantity.unit) if quantity.unit else ''}"
    else:
        both = z if mean is None else np.concatenate([z.ravel(), mean.ravel()])
        zmin, zmax, source = physical_range(quantity.kind, facts, both)
        kind = scale_kind(quantity.kind)
    span_start = start if start is not None else (data.starts[0] if len(data.starts) else None)
    span_end = end if end is not None else (data.starts[-1] + np.timedelta64(int(round(data.bin_seconds * 1e9)), "ns")
                                            if len(data.starts) else None)
    return {
        "mode": mode, "encoding": "u8", "sort": sort, "bin_seconds": float(shown.bin_seconds),
        "times": [iso(t) for t in shown.starts],
        "window": {"start": iso(span_start), "end": iso(span_end)},
        "scale": {"zmin": float(zmin), "zmax": float(zmax), "kind": kind, "source": source, "bad": quantity.bad,
                  "colorscale": colorscale(mode, quantity.bad)},
        "rows": out_rows, "aggregated_by": by, "separators": separators(out_rows, sort),
        "z": encode_u8(z, zmin, zmax), "mean": None if mean is None else encode_u8(mean, zmin, zmax),
        "coverage": extent,
    }


# ---------------------------------------------------------------------------------------------
# The node × field table


def _significant(value: float, digits: int = 4) -> float | None:
    return float(f"{value:.{digits}g}") if math.isfinite(value) else None


def node_stats(hosts, counts, means, lows, highs) -> tuple[list[str], list[int], list[list[dict]]]:
    """Per node (in order of first appearance) its number of GPUs and, per field, the minimum, the mean
    weighted by sample counts and the maximum over the node's GPUs and all time buckets; None where the node
    has no sample of the field. Arrays: (gpus, fields, buckets), as in a telemetry job cube; values to 4
    significant digits."""
    hosts = [str(host) for host in hosts]
    codes = _codes(hosts)
    names = list(dict.fromkeys(hosts))
    counts = np.asarray(counts, dtype=float)
    has = counts > 0
    with np.errstate(invalid="ignore"):
        sums = np.where(has, np.asarray(means, dtype=float) * counts, 0.0).sum(axis=2)  # (gpus, fields)
        lows_gpu = np.where(has, np.asarray(lows, dtype=float), np.inf).min(axis=2)
        highs_gpu = np.where(has, np.asarray(highs, dtype=float), -np.inf).max(axis=2)
    weights = counts.sum(axis=2)
    fields = counts.shape[1]
    node_sums, node_weights = np.zeros((len(names), fields)), np.zeros((len(names), fields))
    node_lows, node_highs = np.full((len(names), fields), np.inf), np.full((len(names), fields), -np.inf)
    np.add.at(node_sums, codes, sums)
    np.add.at(node_weights, codes, weights)
    np.minimum.at(node_lows, codes, lows_gpu)
    np.maximum.at(node_highs, codes, highs_gpu)
    gpus = np.bincount(codes, minlength=len(names)).tolist()
    table = []
    for n in range(len(names)):
        row = []
        for f in range(fields):
            if node_weights[n, f] > 0:
                row.append({"min": _significant(node_lows[n, f]), "mean": _significant(node_sums[n, f] / node_weights[n, f]),
                            "max": _significant(node_highs[n, f])})
            else:
                row.append({"min": None, "mean": None, "max": None})
        table.append(row)
    return names, gpus, table
