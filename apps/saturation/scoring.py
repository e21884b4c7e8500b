"""The GPU saturation score: how close the busiest unit of a GPU runs to what it can sustain.

Per GPU and sample (docs/reference dcgm-saturation.md §6):

* compute  C = min(1, max over pipes p of activity_p / ceiling_p)   (tensor 1004, fp64 1006, fp32 1007, fp16 1008)
* memory   M = min(1, DRAM 1005 / ceiling_dram)
* link     L = min(1, max over links and directions of rate / (peak · ceiling_link))
             (NVLink 1011/1012, PCIe 1009/1010, C2C 1076/1078, each direction against its own peak)
* S = max(C, M, L); the limiter is the resource that sets S.

Utilisation (GR engine 1001, or GPU_UTIL 203) says *when* the GPU was busy and stays an
explanation, as do SM activity, occupancy, the clock factor and throttling: none of them is
multiplied into S. Ceilings and peaks come from a per-model table (``GpuModel``) that staff can
override.

A GPU that reports utilisation only (GPU_UTIL 203, clocks, power, temperature: no profiling fields,
as on GPUs whose DCGM host engine refuses the profiling counters) has no S. Its job gets a *limited
score* (``JobSummary.limited``): busy time, clock factor, throttling, energy and idle GPUs, with the
label ``LIMITED_LABEL`` first and the profiling fields it lacks in ``missing_fields``.
Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

PIPES = {"tensor": 1004, "fp64": 1006, "fp32": 1007, "fp16": 1008}
LINKS = {"nvlink": (1011, 1012), "pcie": (1009, 1010), "c2c": (1076, 1078)}  # (tx, rx)
LIMITERS = (*PIPES, "dram", *LINKS)
COMPUTE_LIMITERS = set(PIPES)
LINK_LIMITERS = set(LINKS)
HIGH, LOW = 0.6, 0.3  # bands: S >= 0.6 high, 0.3..0.6 moderate, < 0.3 low
POWER_BITS, THERMAL_BITS = 0x4 | 0x80, 0x20 | 0x40
EPSILON = 1e-6
# DCGM profiling fields (DCGM_FI_PROF_*) the score and its explanations read; 203, 100, 113, 112, 150 and
# 155 are device fields, which every GPU reports.
PROFILING_FIELDS = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078)
LIMITED_LABEL = "limited: utilisation only"  # the job's first label when no GPU has the fields S needs
GPU_LIMITED_LABEL = "utilisation only"  # a GPU with utilisation but without the fields S needs


@dataclass(frozen=True)
class GpuModel:
    """Practical ceilings (fractions of the counters' 1.0) and per-direction link peaks (bytes/s)."""

    name: str
    matches: tuple[str, ...]  # substrings of DCGM's device name that select this model
    ceilings: dict = field(default_factory=lambda: {"tensor": 0.93, "fp64": 1.0, "fp32": 1.0, "fp16": 1.0, "dram": 0.8,
                                                     "link": 0.9})
    link_peaks: dict = field(default_factory=dict)  # link -> bytes/s per direction
    max_sm_clock_mhz: float = 1980.0
    # Physical facts for the heatmaps' fixed colour ranges (apps/core/heatmaps.physical_range): H100 SXM and
    # GH200 defaults, overridable per model; DCGM's own numbers (fields 113, 153, 160) win when the data has them.
    base_sm_clock_mhz: float = 1590.0
    idle_temp_c: float = 30.0
    slowdown_temp_c: float = 87.0
    power_limit_w: float = 700.0

    def with_overrides(self, ceilings: dict | None = None, link_peaks: dict | None = None) -> "GpuModel":
        return replace(self, ceilings={**self.ceilings, **(ceilings or {})}, link_peaks={**self.link_peaks, **(link_peaks or {})})


MODELS = {
    "H100 SXM": GpuModel("H100 SXM", ("H100 80GB HBM3", "H100 SXM"), link_peaks={"nvlink": 450e9, "pcie": 63e9, "c2c": 450e9}),
    "GH200": GpuModel("GH200", ("GH200",), link_peaks={"nvlink": 450e9, "pcie": 63e9, "c2c": 450e9}),
}
DEFAULT_MODEL = MODELS["GH200"]


def model_for(device_name: str | None, models: dict[str, GpuModel] = MODELS, default: GpuModel | None = None) -> GpuModel:
    """The model whose name patterns occur in ``device_name``; ``default`` (GH200) otherwise."""
    for model in models.values():
        if device_name and any(pattern in device_name for pattern in model.matches):
            return model
    return default or DEFAULT_MODEL


@dataclass
class Scores:
    """Arrays of one shape (e.g. GPUs x samples); NaN where the inputs were missing."""

    S: np.ndarray
    C: np.ndarray
    M: np.ndarray
    L: np.ndarray
    limiter: np.ndarray  # index into LIMITERS, -1 where S is unknown
    busy: np.ndarray  # U: GR engine busy fraction (or GPU_UTIL / 100)
    sm_active: np.ndarray  # A
    occupancy: np.ndarray  # O
    clock_factor: np.ndarray  # k = SM clock / max SM clock
    power_capped: np.ndarray  # share of the sample's time with a power-cap reason (0..1; 0 where unknown)
    thermal: np.ndarray  # share with a thermal-slowdown reason

    @property
    def S_busy(self) -> np.ndarray:
        """Saturation while busy: separates idle-but-at-the-roof from always-running-never-near-it."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.minimum(1.0, self.S / np.maximum(self.busy, EPSILON))

    @property
    def throttled(self) -> np.ndarray:
        return np.maximum(self.power_capped, self.thermal)

    def limiter_names(self) -> np.ndarray:
        names = np.array([*LIMITERS, ""], dtype=object)
        return names[self.limiter]


def _get(values: dict, field_id: int, shape) -> np.ndarray:
    array = values.get(field_id)
    return np.full(shape, np.nan) if array is None else np.asarray(array, dtype=float)


def throttle_shares(reasons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(power-capped, thermal) as 0/1 per sample from DCGM's clock-event reasons bitmask (field 112)."""
    mask = np.nan_to_num(np.asarray(reasons, dtype=float), nan=0.0).astype(np.int64)
    return ((mask & POWER_BITS) > 0).astype(float), ((mask & THERMAL_BITS) > 0).astype(float)


def score(values: dict[int, np.ndarray], model: GpuModel = DEFAULT_MODEL,
          throttle: tuple[np.ndarray, np.ndarray] | None = None) -> Scores:
    """Score samples given as ``{DCGM field id: array}`` (any common shape, DCGM units).

    ``throttle`` gives the (power-capped, thermal) share of each sample's time when the samples are
    bucket means, where a mean of the reasons bitmask (field 112) would mean nothing; without it the
    bitmask in ``values[112]`` is read per sample."""
    shape = np.shape(next(iter(values.values())))
    ceilings = model.ceilings
    candidates = []
    for pipe, field_id in PIPES.items():
        candidates.append(_get(values, field_id, shape) / ceilings[pipe])
    dram = _get(values, 1005, shape) / ceilings["dram"]
    candidates.append(dram)
    link_terms = []
    for link, (tx, rx) in LINKS.items():
        peak = model.link_peaks.get(link)
        if not peak:
            term = np.full(shape, np.nan)
        else:
            with np.errstate(invalid="ignore"):
                term = np.fmax(_get(values, tx, shape), _get(values, rx, shape)) / (peak * ceilings["link"])
        link_terms.append(term)
        candidates.append(term)
    stack = np.stack(candidates)  # (limiters, *shape)
    known = ~np.isnan(stack)
    filled = np.where(known, stack, -np.inf)
    limiter = np.argmax(filled, axis=0)
    any_known = known.any(axis=0)
    limiter = np.where(any_known, limiter, -1)
    with np.errstate(invalid="ignore"):
        compute = np.minimum(1.0, np.fmax.reduce(np.stack(candidates[:len(PIPES)]), axis=0))
        memory = np.minimum(1.0, dram)
        link = np.minimum(1.0, np.fmax.reduce(np.stack(link_terms), axis=0))
        saturation = np.where(any_known, np.minimum(1.0, np.max(filled, axis=0)), np.nan)
    busy = _get(values, 1001, shape)
    util = _get(values, 203, shape) / 100.0
    busy = np.where(np.isnan(busy), util, busy)
    clock = _get(values, 100, shape)
    max_clock = _get(values, 113, shape)
    max_clock = np.where(np.isnan(max_clock) | (max_clock <= 0), model.max_sm_clock_mhz, max_clock)
    if throttle is None:
        power_capped, thermal = throttle_shares(_get(values, 112, shape))
    else:
        power_capped, thermal = (np.nan_to_num(np.broadcast_to(np.asarray(a, dtype=float), shape), nan=0.0) for a in throttle)
    return Scores(S=saturation, C=compute, M=memory, L=link, limiter=limiter, busy=busy,
                  sm_active=_get(values, 1002, shape), occupancy=_get(values, 1003, shape),
                  clock_factor=clock / max_clock, power_capped=power_capped, thermal=thermal)


# ---------------------------------------------------------------------------------------------
# Diagnosis (§6.3)

def diagnose(S: float, limiter: str, busy: float, sm_active: float, occupancy: float, clock_factor: float,
             throttled_fraction: float) -> list[str]:
    """Labels for one GPU (or sample), most important first."""
    labels = []
    if not np.isnan(busy) and busy < 0.05:
        return ["idle"]
    if not np.isnan(clock_factor) and clock_factor < 0.9 and throttled_fraction > 0.1:
        labels.append("clock-limited (power/thermal)")
    if not np.isnan(S) and S >= HIGH:
        if limiter in COMPUTE_LIMITERS:
            labels.append(f"compute-saturated ({limiter})" + (": FP32 pipes, not tensor cores" if limiter == "fp32" else ""))
        elif limiter == "dram":
            labels.append("memory-bandwidth-saturated")
        elif limiter in LINK_LIMITERS:
            labels.append(f"communication-saturated ({limiter})")
    elif not np.isnan(busy) and busy >= 0.5 and not np.isnan(sm_active) and sm_active < 0.5:
        labels.append("under-filled: too few blocks or small kernels")
    elif not np.isnan(sm_active) and sm_active >= 0.8 and not np.isnan(S) and S < LOW:
        labels.append("latency-bound, low occupancy" if not np.isnan(occupancy) and occupancy < 0.25
                      else "latency/dependency-bound: busy warps, no roof")
    return labels or [band(S)]


def band(S: float) -> str:
    if np.isnan(S):
        return "no data"
    return "high saturation" if S >= HIGH else "moderate saturation" if S >= LOW else "low saturation"


# ---------------------------------------------------------------------------------------------
# Job aggregation (§6.4): arrays are (gpus, samples)

def steady_reached(busy: np.ndarray, window: slice) -> bool:
    """Whether ``window`` (``steady_state(busy)``) is a steady state of its own: the job's median busy fraction
    passed 0.5 at its first sample (the warm-up is over), not the whole run taken for want of one."""
    if busy.ndim != 2 or not busy.shape[1] or window.start >= busy.shape[1]:
        return False
    column = busy[:, window.start]
    column = column[np.isfinite(column)]
    return bool(column.size) and float(np.median(column)) > 0.5


def steady_state(busy: np.ndarray) -> slice:
    """Samples from the first to the last where the job's median busy fraction exceeds 0.5 (warm-up
    and tear-down trimmed); the whole run when it never does."""
    if not busy.size:
        median = np.array([])
    elif np.isnan(busy).any():
        with warnings.catch_warnings():  # a column without any value is simply not above 0.5
            warnings.simplefilter("ignore", RuntimeWarning)
            median = np.nanmedian(busy, axis=0)
    else:  # one partition of the whole array instead of nanmedian's one per column
        median = np.median(busy, axis=0)
    above = np.flatnonzero(np.nan_to_num(median, nan=0.0) > 0.5)
    if not len(above):
        return slice(0, busy.shape[1] if busy.ndim == 2 else 0)
    return slice(int(above[0]), int(above[-1]) + 1)


@dataclass
class GpuSummary:
    score: float  # mean S over the steady state, 0..1
    compute: float
    memory: float
    link: float
    busy: float
    p10: float
    p50: float
    p90: float
    time_high: float  # fraction of steady samples with S >= 0.6
    limiter: str  # the most frequent limiter
    limiter_share: dict
    clock_factor: float
    throttled: float  # fraction of samples with a power or thermal reason
    labels: list[str]
    limited: bool = False  # utilisation only: busy, clocks and throttling, no S


@dataclass
class JobSummary:
    score: float  # 0..100: mean of the per-GPU means
    compute: float
    memory: float
    link: float
    limiter: str
    limiter_share: dict
    minimum: float
    maximum: float
    imbalance: float  # (max - min) / mean of per-GPU scores
    idle_gpus: int
    window: slice
    energy_j: float | None
    energy_low_j: float | None  # energy spent while S < 0.3
    gpus: list[GpuSummary]
    labels: list[str]
    # What can be said without S (also for scored jobs): means over GPUs of the steady-state means.
    busy: float = float("nan")  # 0..1: share of the steady state the GPUs were busy (GR engine or GPU_UTIL)
    clock_factor: float = float("nan")  # SM clock / max SM clock
    throttled: float = float("nan")  # share of the time with a power-cap or thermal reason
    limited: bool = False  # no GPU has the profiling fields S needs: a limited score (busy time, clocks, power)
    limited_gpus: int = 0  # GPUs with utilisation but no S (all of them when ``limited``)
    missing_fields: tuple = ()  # DCGM profiling fields no GPU of the job reported (as far as the scores tell)
    steady_found: bool = True  # the GPUs' median busy share passed 0.5: the warm-up is over (apps/saturation/waste.py)

    @property
    def limiter_words(self) -> str:
        return {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}.get(self.limiter,
                                                                                                             self.limiter or "nothing")


def _share(limiter: np.ndarray) -> dict:
    valid = limiter[limiter >= 0]
    if not valid.size:
        return {}
    counts = np.bincount(valid, minlength=len(LIMITERS))
    return {LIMITERS[i]: round(float(counts[i]) / valid.size, 4) for i in np.flatnonzero(counts)}


def _row_means(array: np.ndarray) -> np.ndarray:
    """Mean of each row ignoring NaN; NaN for a row without any value (no warning)."""
    valid = np.isfinite(array)
    counts = valid.sum(axis=1)
    sums = np.where(valid, array, 0.0).sum(axis=1, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _row_percentiles(array: np.ndarray, quantiles=(10, 50, 90)) -> np.ndarray:
    """(len(quantiles), rows) NaN-aware percentiles, NaN for empty rows, without nanpercentile's per-row
    warnings: rows are sorted once with NaN last and interpolated by each row's own count."""
    rows = array.shape[0]
    if not array.size:
        return np.full((len(quantiles), rows), np.nan)
    ordered = np.sort(np.where(np.isfinite(array), array, np.inf), axis=1)
    counts = np.isfinite(array).sum(axis=1)
    out = np.full((len(quantiles), rows), np.nan)
    has = counts > 0
    index = np.arange(rows)
    for i, q in enumerate(quantiles):
        position = (counts - 1).clip(min=0) * q / 100.0
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, (counts - 1).clip(min=0))
        weight = position - low
        value = ordered[index, low] * (1 - weight) + np.where(weight > 0, ordered[index, high], 0.0) * weight
        out[i] = np.where(has, value, np.nan)
    return out


def summarize(scores: Scores, *, interval_s: float, power_w: np.ndarray | None = None) -> JobSummary:
    """Per-GPU and job numbers over the steady-state window of (gpus, samples) scores."""
    window = steady_state(scores.busy)
    pick = lambda array: np.asarray(array)[:, window]  # noqa: E731
    S, busy, limiter = pick(scores.S), pick(scores.busy), pick(scores.limiter)
    means = {name: _row_means(pick(getattr(scores, name))) for name in ("S", "C", "M", "L", "busy", "sm_active", "occupancy",
                                                                          "clock_factor", "throttled")}
    p10, p50, p90 = _row_percentiles(S)
    known = np.isfinite(S).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        time_high = np.where(known > 0, (S >= HIGH).sum(axis=1) / np.maximum(known, 1), 0.0)
    counts = np.stack([(limiter == i).sum(axis=1) for i in range(len(LIMITERS))], axis=1)  # (gpus, limiters)
    totals = counts.sum(axis=1)
    # Python lists once, not numpy scalars per GPU: at 4,096 GPUs this loop was a third of an update's summary.
    columns = {name: means[name].tolist() for name in ("S", "C", "M", "L", "busy", "sm_active", "occupancy", "clock_factor")}
    throttled = np.nan_to_num(means["throttled"], nan=0.0).tolist()
    tens, medians, nineties, highs = p10.tolist(), p50.tolist(), p90.tolist(), time_high.tolist()
    count_rows, total_rows, leading = counts.tolist(), totals.tolist(), np.argmax(counts, axis=1).tolist()
    gpus = []
    for row in range(S.shape[0]):
        total = total_rows[row]
        share = ({LIMITERS[i]: round(n / total, 4) for i, n in enumerate(count_rows[row]) if n} if total else {})
        summary = GpuSummary(
            score=columns["S"][row], compute=columns["C"][row], memory=columns["M"][row], link=columns["L"][row],
            busy=columns["busy"][row], p10=tens[row], p50=medians[row], p90=nineties[row], time_high=highs[row],
            limiter=LIMITERS[leading[row]] if total else "", limiter_share=share,
            clock_factor=columns["clock_factor"][row], throttled=throttled[row], labels=[])
        summary.labels = diagnose(summary.score, summary.limiter, summary.busy, columns["sm_active"][row],
                                  columns["occupancy"][row], summary.clock_factor, summary.throttled)
        if math.isfinite(summary.busy) and not math.isfinite(summary.score):
            # Busy but no S: the GPU reports utilisation only, which is not "no data".
            summary.limited = True
            summary.labels = [GPU_LIMITED_LABEL if label == "no data" else label for label in summary.labels]
        gpus.append(summary)
    per_gpu = means["S"]
    active = per_gpu[np.isfinite(per_gpu)]
    limited_rows = np.array([g.limited for g in gpus], dtype=bool)
    limited = bool(limited_rows.any()) and not active.size
    job_score = float(np.mean(active)) if active.size else float("nan")
    share = _share(limiter.ravel())
    energy = energy_low = None
    if power_w is not None and np.size(power_w):
        power = np.nan_to_num(np.asarray(power_w, dtype=float)[:, window], nan=0.0)
        energy = float(power.sum() * interval_s)
        if not limited:  # without S there is no "energy at low saturation"; GPUs without S are not counted as low
            low = (np.nan_to_num(S, nan=0.0) < LOW) & ~limited_rows[:, None]
            energy_low = float((power * low).sum() * interval_s)

    def component(name):
        values = means[name]
        return float(np.mean(values[np.isfinite(values)])) if np.isfinite(values).any() else float("nan")

    idle = int(np.sum(np.isfinite(means["busy"]) & (means["busy"] < 0.05)))
    job = JobSummary(
        score=round(100 * job_score, 1) if np.isfinite(job_score) else float("nan"),
        compute=component("C"), memory=component("M"), link=component("L"),
        limiter=max(share, key=share.get) if share else "", limiter_share=share,
        minimum=float(active.min()) if active.size else float("nan"), maximum=float(active.max()) if active.size else float("nan"),
        imbalance=float((active.max() - active.min()) / job_score) if active.size and job_score > 0 else float("nan"),
        idle_gpus=idle, window=window, energy_j=energy, energy_low_j=energy_low, gpus=gpus, labels=[],
        busy=component("busy"), clock_factor=component("clock_factor"), throttled=component("throttled"),
        limited=limited, limited_gpus=int(limited_rows.sum()), missing_fields=missing_fields(scores),
        steady_found=steady_reached(np.asarray(scores.busy), window))
    labels = [LIMITED_LABEL] if limited else []
    if idle:
        labels.append(f"{idle} idle GPU{'s' * (idle > 1)}")
    if job.limited_gpus and not limited:
        labels.append(f"{job.limited_gpus} GPU{'s' * (job.limited_gpus > 1)} report{'s' * (job.limited_gpus == 1)} "
                      "utilisation only")
    common = {}
    for g in gpus:
        for label in g.labels:
            if label != GPU_LIMITED_LABEL:  # said once for the job, above
                common[label] = common.get(label, 0) + 1
    labels += [label for label, count in sorted(common.items(), key=lambda item: -item[1]) if count >= max(1, len(gpus) // 2)]
    job.labels = labels or [band(job_score)]
    return job


_FIELD_GROUPS = (((1002,), "sm_active"), ((1003,), "occupancy"), ((1004, 1006, 1007, 1008), "C"), ((1005,), "M"),
                 ((1009, 1010, 1011, 1012, 1076, 1078), "L"))


def missing_fields(scores: Scores) -> tuple[int, ...]:
    """The DCGM profiling fields that no GPU and sample reported, as far as the scores tell: a pipe,
    DRAM or link term is missing only when every field behind it is. (Whether busy came from the GR
    engine, 1001, or from GPU_UTIL, 203, the scores do not keep.)"""
    missing = []
    for fields, name in _FIELD_GROUPS:
        if not np.isfinite(np.asarray(getattr(scores, name), dtype=float)).any():
            missing.extend(fields)
    return tuple(sorted(missing))
