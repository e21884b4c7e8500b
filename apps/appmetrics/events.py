"""Dips in a job's throughput and what the hardware says caused each one.

``find_events(ts, tokens_per_s, evidence)`` finds the dips in an application's throughput series and
attributes each to a cause, with a one-line reason that cites the evidence (numbers and times, UTC).

Finding dips (all thresholds relative to the *baseline*):

* The series is cleaned: non-finite values and missing times dropped, sorted by time, samples at the same
  time averaged. The logging interval ``dt`` is the median spacing of the samples.
* ``smooth`` is a centred rolling median over 3 samples (one noisy sample is not a dip; a median keeps the
  edges of a real dip sharp). The baseline is the 90th percentile of a 15-sample rolling median: the typical
  throughput of steady training. A high quantile, not the median, so that a level shift that never recovers
  (a throttled GPU from hour 1 of 3) stays a dip instead of becoming the new normal (it does become the
  normal when it covers more than about 90 % of the data); with +-4 % noise it sits about 1 % above the
  mean, so a dip reads about a point deeper than planted.
* A sample is *low* when ``smooth`` is ``ENTER`` (12 %) or more below the baseline, or the sample itself is
  ``DEEP`` (30 %) below (a pause shorter than two logging intervals). A dip is a run of samples under the
  weaker ``EXIT`` threshold (5 % below; sample and ``smooth`` both) that holds at least one low sample
  (hysteresis: a shifted level whose noise crosses 12 % now and then stays one dip). Dips fewer than
  ``MERGE`` (2) samples apart are merged. Noise of +-4 % gives no dip.
* Warm-up is not an event: samples before ``smooth`` first reaches the EXIT level are skipped.
* A gap in the data longer than ``GAP_FACTOR`` (5) logging intervals (and at least a minute) followed by a
  dip (a restart's warm-up) joins that dip, which then starts at the last sample before the gap; a gap with
  an ``event.restart`` marker in it is a dip of its own even when throughput comes back at once.
* ``start`` is the time of the first sample in the dip (the last sample before a gap), ``end`` the time of
  the first sample after it, None when the dip lasts to the end of the data.
* ``dip`` = 1 - (mean throughput over the dip) / baseline, time-weighted: a gap counts as zero throughput.

Phases inside a dip: samples that fall in a checkpoint or evaluation phase (a marker with its duration, or
buckets where the GPUs were idle together, and the first line after it) are carved out of a dip that also holds
other low samples; each phase is its own event, and the rest (when at least ``SPLIT_TAIL`` samples, low on
average) one more, from the dip's start: a straggler that appears before or during a checkpoint keeps its event.
A phase carved out of a longer dip is measured against the level around it (the dip's other samples within
``LOCAL_SAMPLES``: after a straggler, the post-straggler level), not the baseline, and keeps only its samples low
against that level: a checkpoint reads the same before and after a straggler appears, while the straggler's own
open-ended dip is still measured against the usual before it. A dip that is one phase starts when the phase began
(its marker), as a carved one does. A checkpoint or pause whose own length is known (the marker's duration, the
GPUs' own samples, buckets of idle GPUs, as the storage panel counts them) is said with that length.

Attribution, first match wins; "near" means from ``tolerance`` before the dip's start (two evidence buckets or
two logging intervals, whichever is longer) to ``NEAR_S`` after it, or the dip's end when sooner: a cause is
what starts a dip, not what happens an hour into it:

1. restart: an ``event.restart`` marker near, or a gap in the data joined to the dip;
2. host (issue 39): no checkpoint or evaluation marker near and no file-system writes near, while the job's
   data-loader workers (``Evidence.loader_cpu``, the collector's ``host_dataloader_cpu``) were on average at
   ``HOST_SATURATED`` (90 %) of their CPUs or more and at least ``HOST_IDLE`` (40 %) of the GPUs idle: the GPUs
   wait on the host (data loading), which would otherwise read as GPUs idle together (a checkpoint);
2. checkpoint: an ``event.checkpoint`` marker near, or at least 80 % of the job's GPUs idle in the same
   bucket during the dip, or a pause of the GPUs in their own samples (4.) while the job wrote to the file
   system; the file system's peak write rate near the dip's start is added when ``write_bytes``
   is known (on the evidence's buckets, or on a grid of its own: ``write_times``, ``write_step_s``);
3. evaluation: an ``event.evaluation`` marker near, or the hardware pattern of a forward-only phase: GPUs
   busy (under 20 % idle), tensor activity at least 20 % below and DRAM activity at least 10 % above their
   medians outside the dips;
4. straggler: a straggler finding whose start is near;
4. pause: the GPUs' own samples (``Evidence.fine``, read around the dip at their own resolution, not the
   evidence's buckets) show at least 80 % of them idle together for ``PAUSE_MIN_S`` or more near the start: a
   synchronous pause (a checkpoint, an evaluation or a data stall) too short to fill a bucket (40 s of a
   60-s bucket leaves the bucket two-thirds idle). With file-system writes near it, or a checkpoint marker,
   it is a checkpoint (2.);
5. straggler: a straggler finding whose start is near;
6. throttling: a GPU whose power or thermal throttle bits switch on near the start (on for at least half
   the dip, on for less than a fifth of the ten buckets before);
7. unknown: no hardware signal explains it.

Plain Python: no Django (numpy and pandas).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

import numpy as np
import pandas as pd

ENTER, EXIT, DEEP = 0.12, 0.05, 0.30
MERGE = 2  # dips separated by at most this many samples are one dip
GAP_FACTOR, GAP_MIN_S = 5.0, 60.0
BASELINE_QUANTILE, BASELINE_WINDOW = 0.9, 15
MIN_SAMPLES = 5
# A long shallow dip counts too: at least this many samples in a row, on average this far below the usual (a
# straggler that costs 8 % for the rest of the run never crosses ENTER but is the costliest dip of all).
SUSTAINED, SUSTAINED_DROP = 12, 0.07
# Samples of a dip outside its checkpoint or evaluation phases make an event of their own when there are at least
# this many of them, low on average (a straggler appearing during a checkpoint).
SPLIT_TAIL = 3
# A phase carved out of a longer dip is measured against the dip's other samples within this many samples of it (at
# least MIN_LOCAL of them): the level around it, which follows a sustained shift (a straggler) the baseline does not.
LOCAL_SAMPLES, MIN_LOCAL = 10, 3
# Evidence explains a dip when it starts up to this long after the dip's start (a straggler detector needs a few
# minutes of lag to flag a GPU), or inside a shorter dip.
NEAR_S = 600.0
IDLE_TOGETHER = 0.8
EVAL_BUSY_IDLE, EVAL_TENSOR_DROP, EVAL_DRAM_RISE = 0.2, 0.2, 0.1
THROTTLE_DURING, THROTTLE_BEFORE, THROTTLE_LOOKBACK = 0.5, 0.2, 10
POWER_BITS, THERMAL_BITS = 0x4 | 0x80, 0x20 | 0x40  # DCGM clock-event reasons: SW/HW power cap, SW/HW thermal
# A synchronous pause: at least IDLE_TOGETHER of the GPUs idle together this long in their own samples. The
# samples are read for at most FINE_READS dips of a job (the first ones), each over its near span.
PAUSE_MIN_S, FINE_READS = 10.0, 24
HOST_SATURATED, HOST_IDLE = 0.9, 0.4
KINDS = ("checkpoint", "straggler", "throttling", "evaluation", "restart", "pause", "host", "unknown")


@dataclass
class Evidence:
    """What the hardware (and the application's markers) say, per time bucket.

    ``times`` are bucket starts (datetime64[ns]; naive means UTC), ``step_s`` the bucket width. Arrays are
    per bucket with NaN where unknown; None means not known at all.
    ``throttled`` maps a GPU label to its throttle state per bucket: booleans (power or thermal throttling)
    or DCGM clock-event-reason bit masks (integers, decoded into power cap and thermal);
    ``throttle_kinds`` may name the kind for a boolean array ("power cap", "thermal").
    ``stragglers``: {"label", "start", "reason"}; ``markers``: {"name", "ts", "value"} with names
    event.checkpoint / event.evaluation / event.restart (value: seconds it took when known, else 1).
    ``write_bytes``: bytes written to the file system per bucket, of ``times`` or, when given, of its own grid
    ``write_times`` (bucket starts) of ``write_step_s`` seconds (file-system counters are read at their own pace,
    often over a longer span than the GPU telemetry).
    ``fine``: ``fine(start_ns, end_ns)`` gives the share of the job's GPUs idle at the resolution of their own
    samples in that window, as (times in ns, shares 0-1); called around a dip's start, for a few dips at most.
    """

    times: np.ndarray
    step_s: float
    idle_share: np.ndarray | None = None
    throttled: dict[str, np.ndarray] = field(default_factory=dict)
    stragglers: list[dict] = field(default_factory=list)
    markers: list[dict] = field(default_factory=list)
    write_bytes: np.ndarray | None = None
    tensor_active: np.ndarray | None = None
    dram_active: np.ndarray | None = None
    throttle_kinds: dict[str, str] = field(default_factory=dict)
    write_times: np.ndarray | None = None
    write_step_s: float | None = None
    fine: Callable[[int, int], tuple[np.ndarray, np.ndarray]] | None = None
    loader_cpu: np.ndarray | None = None  # per bucket of ``times``: the data-loader workers' CPU share (0-1)


@dataclass
class _Dip:
    first: int  # index of the first sample in the dip
    last: int  # index of the last sample in the dip
    start_ns: int
    end_ns: int | None
    dip: float
    gap_s: float = 0.0  # length of a data gap joined to the dip


def to_ns(values) -> np.ndarray:
    """Nanoseconds since the epoch (UTC) for datetimes, datetime64 values or ISO strings; naive means UTC."""
    index = pd.DatetimeIndex(pd.to_datetime(pd.Series(values), utc=True, errors="coerce"))
    return index.as_unit("ns").asi8.copy() if len(index) else np.array([], dtype="int64")


def _when(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)


def _clock(ns: int) -> str:
    return _when(ns).strftime("%H:%M:%S")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def clean_series(ts, values) -> tuple[np.ndarray, np.ndarray]:
    """(times in ns, values): finite values only, sorted by time, samples at the same time averaged."""
    times = to_ns(ts)
    data = np.asarray(values, dtype="float64").reshape(-1)
    if len(times) != len(data):
        raise ValueError(f"find_events: {len(times)} times but {len(data)} throughput values")
    keep = np.isfinite(data) & (times != np.iinfo("int64").min)
    times, data = times[keep], data[keep]
    order = np.argsort(times, kind="stable")
    times, data = times[order], data[order]
    unique, first, counts = np.unique(times, return_index=True, return_counts=True)
    if len(unique) < len(times):
        data = np.add.reduceat(data, first) / counts
    return unique, data


def find_events(ts, tokens_per_s, evidence: Evidence | None = None) -> list[dict]:
    """The dips of ``tokens_per_s`` (sampled at ``ts``) as {"start", "end", "kind", "reason", "dip"}, by time.

    ``start``/``end`` are timezone-aware datetimes (UTC); ``end`` None while the dip lasts to the end of the
    data; ``dip`` the fraction of throughput lost (0.4: 40 % below the baseline). A steady job gives [].
    """
    times, values = clean_series(ts, tokens_per_s)
    if len(times) < MIN_SAMPLES:
        return []
    dips, baseline, dt = _dips(times, values, evidence)
    if not dips:
        return []
    context = _Context(times, values, baseline, dt, evidence, dips)
    return [event for dip in dips for event in context.events(dip)]


def _dips(times: np.ndarray, values: np.ndarray, evidence: Evidence | None) -> tuple[list[_Dip], float, float]:
    """The dips of the series, its baseline and its logging interval (seconds)."""
    spacing = np.diff(times) / 1e9
    dt = float(np.median(spacing))
    series = pd.Series(values)
    smooth = series.rolling(3, center=True, min_periods=1).median().to_numpy()
    steady = series.rolling(BASELINE_WINDOW, center=True, min_periods=1).median()
    baseline = float(np.quantile(steady, BASELINE_QUANTILE))
    if not baseline > 0:
        return [], baseline, dt
    relative, smooth_relative = values / baseline, smooth / baseline
    deep = relative < 1 - DEEP
    weak = ((smooth_relative < 1 - EXIT) & (relative < 1 - EXIT)) | deep
    strong = (smooth_relative < 1 - ENTER) | deep
    reached = np.flatnonzero(smooth_relative >= 1 - EXIT)
    warm = reached[0] if len(reached) else len(values)
    weak[:warm] = False
    gap_after = np.zeros(len(values), dtype=bool)  # a gap in the data just before this sample
    gap_after[1:] = spacing > max(GAP_FACTOR * dt, GAP_MIN_S)
    gap_after[:warm + 1] = False
    runs = _runs(weak)
    runs = [(a, b) for a, b in runs if strong[a:b + 1].any()
            or (b - a + 1 >= SUSTAINED and relative[a:b + 1].mean() <= 1 - SUSTAINED_DROP)]
    runs = _merge(runs)
    dips = []
    covered = set()
    for first, last in runs:
        gaps = np.flatnonzero(gap_after[first:last + 1]) + first  # gaps just before or inside the dip
        gap_s = float(((times[gaps] - times[gaps - 1]) / 1e9 - dt).sum()) if len(gaps) else 0.0
        covered.update(gaps.tolist())
        start_index = first - 1 if gap_after[first] else first
        dips.append(_make_dip(times, values, baseline, dt, first, last, start_index, gap_s))
    dips.extend(_restart_gaps(times, values, baseline, dt, gap_after, covered, evidence))
    dips.sort(key=lambda dip: dip.start_ns)
    return dips, baseline, dt


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True in ``mask``."""
    edges = np.diff(np.concatenate(([0], mask.astype("int8"), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


def _merge(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for first, last in runs:
        if merged and first - merged[-1][1] - 1 <= MERGE:
            merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


def _make_dip(times, values, baseline, dt, first, last, start_index, gap_s) -> _Dip:
    end_ns = int(times[last + 1]) if last + 1 < len(times) else None
    lost_time = (last - first + 1) * dt + gap_s
    dip = 1.0 - float(values[first:last + 1].sum()) * dt / (baseline * lost_time)
    return _Dip(first, last, int(times[start_index]), end_ns, min(1.0, max(0.0, dip)), gap_s)


def _restart_gaps(times, values, baseline, dt, gap_after, covered, evidence) -> list[_Dip]:
    """Dips of their own for gaps with an event.restart marker that no dip already starts after."""
    restarts = _marker_ns(evidence, "event.restart")
    if not len(restarts):
        return []
    found = []
    for after in np.flatnonzero(gap_after):
        if after in covered:
            continue
        before_ns, after_ns = times[after - 1], times[after]
        if ((restarts > before_ns) & (restarts <= after_ns)).any():
            gap_s = (after_ns - before_ns) / 1e9 - dt
            found.append(_Dip(after, after - 1, int(before_ns), int(after_ns), 1.0, gap_s))
    return found


def _marker_ns(evidence: Evidence | None, name: str) -> np.ndarray:
    if evidence is None:
        return np.array([], dtype="int64")
    stamps = [marker.get("ts") for marker in evidence.markers if marker.get("name") == name]
    return to_ns(stamps) if stamps else np.array([], dtype="int64")


def _optional(array, length: int) -> np.ndarray:
    """A float array of ``length`` from an optional evidence array (all NaN when absent or of the wrong size)."""
    if array is None:
        return np.full(length, np.nan)
    data = np.asarray(array, dtype="float64").reshape(-1)
    return data if len(data) == length else np.full(length, np.nan)


class _Context:
    """The evidence, aligned once, that each dip is checked against."""

    def __init__(self, times, values, baseline, dt, evidence: Evidence | None, dips: list[_Dip]):
        self.times, self.values, self.baseline, self.dt = times, values, baseline, dt
        self.evidence = evidence or Evidence(times=np.array([], dtype="datetime64[ns]"), step_s=dt)
        self.buckets = to_ns(self.evidence.times)
        order = np.argsort(self.buckets, kind="stable")
        self.buckets = self.buckets[order]
        length = len(self.buckets)
        self.step_s = float(self.evidence.step_s) if self.evidence.step_s else dt
        self.idle = _optional(self.evidence.idle_share, length)[order]
        self.tensor = _optional(self.evidence.tensor_active, length)[order]
        self.dram = _optional(self.evidence.dram_active, length)[order]
        self.loader = _optional(self.evidence.loader_cpu, length)[order]
        if self.evidence.write_times is not None:
            self.write_buckets = to_ns(self.evidence.write_times)
            write_order = np.argsort(self.write_buckets, kind="stable")
            self.write_buckets = self.write_buckets[write_order]
            self.write_step_s = float(self.evidence.write_step_s or self.step_s)
            self.writes = _optional(self.evidence.write_bytes, len(self.write_buckets))[write_order]
        else:
            self.write_buckets, self.write_step_s = self.buckets, self.step_s
            self.writes = _optional(self.evidence.write_bytes, length)[order]
        self.throttled = {label: self._throttle_array(array, length)[order]
                          for label, array in self.evidence.throttled.items()}
        self.tolerance_ns = int(max(2 * self.step_s, 2 * dt) * 1e9)
        self.markers = {name: self._markers(name) for name in ("event.restart", "event.checkpoint",
                                                               "event.evaluation")}
        outside = np.ones(length, dtype=bool)
        for dip in dips:
            first, last = self._bucket_range(dip)
            outside[first:last] = False
        self.tensor_usual = _nanmedian(self.tensor[outside])
        self.dram_usual = _nanmedian(self.dram[outside])
        self._pauses: dict[tuple[int, int], tuple | None] = {}

    @staticmethod
    def _throttle_array(array, length: int) -> np.ndarray:
        data = np.asarray(array).reshape(-1)
        if len(data) != length:
            return np.zeros(length, dtype="int64")
        if data.dtype == bool:
            return data.astype("int64") * -1  # -1: throttled, kind not given by bits
        return np.nan_to_num(data.astype("float64"), nan=0).astype("int64")

    def _markers(self, name: str) -> list[tuple[int, float]]:
        found = []
        for marker in self.evidence.markers:
            if marker.get("name") != name:
                continue
            stamp = to_ns([marker.get("ts")])
            if len(stamp) and stamp[0] != np.iinfo("int64").min:
                value = marker.get("value")
                found.append((int(stamp[0]), float(value) if value is not None else 1.0))
        return sorted(found)

    def _bucket_range(self, dip: _Dip) -> tuple[int, int]:
        """[first, last) indexes of the buckets that overlap the dip."""
        step_ns = int(self.step_s * 1e9)
        end_ns = dip.end_ns if dip.end_ns is not None else int(self.times[-1]) + int(self.dt * 1e9)
        first = int(np.searchsorted(self.buckets, dip.start_ns - step_ns, side="right"))
        last = int(np.searchsorted(self.buckets, end_ns, side="left"))
        return first, max(first, last)

    def _near_span(self, dip: _Dip) -> tuple[int, int]:
        """Where evidence explains ``dip``: from ``tolerance`` before its start to ``NEAR_S`` after it (less for a
        shorter dip). A cause is what starts the dip; something that happens an hour into a long dip does not."""
        length_ns = (dip.end_ns if dip.end_ns is not None else int(self.times[-1]) + int(self.dt * 1e9)) - dip.start_ns
        return dip.start_ns - self.tolerance_ns, dip.start_ns + max(self.tolerance_ns, min(length_ns, int(NEAR_S * 1e9)))

    def _near(self, name: str, dip: _Dip) -> tuple[int, float] | None:
        lo, hi = self._near_span(dip)
        for stamp, value in self.markers[name]:
            if lo <= stamp <= hi:
                return stamp, value
        return None

    def events(self, dip: _Dip) -> list[dict]:
        """The dip's events. A dip that holds a phase the application or the GPUs mark (a checkpoint, an
        evaluation) beside samples that are low for another reason (a straggler appearing before or during a
        checkpoint) gives one event per phase and one for the rest, each explained on its own."""
        began = self._phase_starts(dip)
        inside = began >= 0
        if not inside.any():
            return [self.event(dip)]
        if inside.all():  # the whole dip is one phase: it began when its marker says, as a phase carved out does
            return [self.event(_Dip(dip.first, dip.last, min(int(began[0]), dip.start_ns), dip.end_ns, dip.dip, dip.gap_s))]
        found = []
        for a, b in _runs(inside):
            # A phase is measured against the level around it (the dip's other samples near it: after a straggler, the
            # post-straggler level), not the usual before the dip: the same checkpoint reads the same before and after.
            level = self._level_around(dip, inside, a, b)
            low = np.flatnonzero(self.values[dip.first + a:dip.first + b + 1] < level * (1 - EXIT))
            if level < self.baseline and len(low):  # lines at the shifted level at its edges are not the phase's
                a, b = a + int(low[0]), a + int(low[-1])
            phase = _make_dip(self.times, self.values, level, self.dt, dip.first + a, dip.first + b, dip.first + a, 0.0)
            # The phase began when its marker (or its idle GPUs) says: the line of the iteration it held comes after.
            start_ns = min(int(began[a]), phase.start_ns, *([dip.start_ns] if a == 0 else []))
            found.append(self.event(_Dip(phase.first, phase.last, start_ns, phase.end_ns, phase.dip, 0.0),
                                    checks=(self._checkpoint, self._evaluation), level=level))
        rest = np.flatnonzero(~inside) + dip.first
        level = float(self.values[rest].mean()) / self.baseline
        if len(rest) >= SPLIT_TAIL and level <= 1 - EXIT:
            start_ns = dip.start_ns if rest[0] == dip.first else int(self.times[rest[0]])
            end_ns = dip.end_ns if rest[-1] == dip.last else int(self.times[rest[-1] + 1])
            remainder = _Dip(int(rest[0]), int(rest[-1]), start_ns, end_ns, min(1.0, max(0.0, 1.0 - level)),
                             self._gap_before(int(rest[0])))
            found.append(self.event(remainder, checks=(self._restart, self._evaluation, self._straggler, self._throttling)))
        return sorted(found, key=lambda event: event["start"])

    def _level_around(self, dip: _Dip, inside: np.ndarray, a: int, b: int) -> float:
        """The throughput level around the phase at samples ``a``..``b`` of ``dip`` (``inside``: the dip's samples in a
        phase): the median of the dip's samples outside every phase within ``LOCAL_SAMPLES`` of it, when there are
        ``MIN_LOCAL`` of them and they sit lower than the baseline (a sustained level shift such as a straggler's);
        else the baseline. A rolling reference: it follows the level the dip shifted to, nothing older."""
        outside = np.flatnonzero(~inside)
        near = outside[(outside >= a - LOCAL_SAMPLES) & (outside <= b + LOCAL_SAMPLES)]
        if len(near) < MIN_LOCAL:
            return self.baseline
        level = float(np.median(self.values[dip.first + near]))
        return level if 0 < level < self.baseline else self.baseline

    def _gap_before(self, index: int) -> float:
        """Seconds of missing data just before sample ``index`` (a gap longer than the dip finder's), else 0: a gap
        later inside a long dip (an evaluation's) is not what started it."""
        if index <= 0:
            return 0.0
        spacing = (self.times[index] - self.times[index - 1]) / 1e9
        return float(spacing - self.dt) if spacing > max(GAP_FACTOR * self.dt, GAP_MIN_S) else 0.0

    def _phase_starts(self, dip: _Dip) -> np.ndarray:
        """Per sample of the dip: when the checkpoint or evaluation phase it falls in began (ns), or -1 outside
        every phase. A phase is a marker with its duration (value other than 1), or buckets where the GPUs were
        idle together, and the first line after it (the iteration that spanned it is logged when it ends)."""
        # The line of the iteration a phase held comes at the next logging step after the phase ends: the phase
        # takes that one line too (within two logging intervals of its end), and nothing after it.
        late_ns, step_ns = 2 * int(self.dt * 1e9), int(self.step_s * 1e9)
        spans = []
        for name in ("event.checkpoint", "event.evaluation"):
            for stamp, seconds in self.markers[name]:
                if seconds != 1.0:  # a marker without its duration says when a phase began, not how long it held
                    spans.append((stamp, stamp + int(seconds * 1e9)))
        together = np.nan_to_num(self.idle, nan=0.0) >= IDLE_TOGETHER
        for a, b in _runs(together):
            spans.append((int(self.buckets[a]), int(self.buckets[b]) + step_ns))
        times = self.times[dip.first:dip.last + 1]
        began = np.full(len(times), -1, dtype="int64")
        for lo, end in spans:
            hit = (times >= lo) & (times < end)
            after = int(np.searchsorted(times, end, side="left"))
            if after < len(times) and times[after] <= end + late_ns:
                hit[after] = True
            began[hit] = np.where(began[hit] >= 0, np.minimum(began[hit], lo), lo)
        return began

    def event(self, dip: _Dip, checks=None, level: float | None = None) -> dict:
        first, last = self._bucket_range(dip)
        for check in checks or (self._restart, self._host, self._checkpoint, self._evaluation, self._pause,
                                self._straggler, self._throttling):
            found = check(dip, first, last)
            if found:
                kind, reason, *held = found
                break
        else:
            kind, reason, held = "unknown", "no hardware signal explains it", []
        length = (dip.end_ns - dip.start_ns) / 1e9 if dip.end_ns is not None else None
        if held and held[0] and length is not None:
            # A pause whose own length is known (its marker's duration, the GPUs' own samples, idle buckets): that is
            # its length, as the storage panel says it; the log's lines only bound it.
            length = float(held[0])
        reference = (f"the usual {self.baseline:,.0f} tokens/s " if level is None or level >= self.baseline
                     else f"the {level:,.0f} tokens/s around it (the usual before it: {self.baseline:,.0f}) ")
        head = (f"throughput {dip.dip * 100:.0f} % below {reference}"
                + (f"for {_duration(length)} from {_clock(dip.start_ns)}" if length is not None
                   else f"from {_clock(dip.start_ns)} to the end of the data"))
        return {"start": _when(dip.start_ns), "end": _when(dip.end_ns) if dip.end_ns is not None else None,
                "kind": kind, "reason": f"{reason}; {head}", "dip": round(dip.dip, 3)}

    def _restart(self, dip: _Dip, first: int, last: int):
        marker = self._near("event.restart", dip)
        if marker:
            return "restart", f"the application restarted at {_clock(marker[0])} (event.restart)"
        if dip.gap_s > 0 and self._near("event.evaluation", dip) is None:  # an evaluation also stops the log
            return "restart", (f"no data for {_duration(dip.gap_s)} after {_clock(dip.start_ns)}, then throughput "
                               f"below the usual: a restart")
        return None

    def _host(self, dip: _Dip, first: int, last: int):
        if last <= first or not np.isfinite(self.loader[first:last]).any():
            return None
        if self._near("event.checkpoint", dip) or self._near("event.evaluation", dip):
            return None
        lo, hi = self._near_span(dip)
        write_step_ns = int(self.write_step_s * 1e9)
        writes = self.writes[int(np.searchsorted(self.write_buckets, lo - write_step_ns, side="right")):
                             int(np.searchsorted(self.write_buckets, hi, side="left"))]
        if np.isfinite(writes).any() and np.nanmax(writes) > 0:
            return None
        cpu, idle = _nanmean(self.loader[first:last]), _nanmean(self.idle[first:last])
        if cpu is None or idle is None or cpu < HOST_SATURATED or idle < HOST_IDLE:
            return None
        return "host", (f"the ranks' data-loader workers at {min(cpu, 1.0) * 100:.0f} % of their CPUs and "
                        f"{idle * 100:.0f} % of the GPUs idle: the GPUs wait on the host (data loading)")

    def _checkpoint(self, dip: _Dip, first: int, last: int):
        marker = self._near("event.checkpoint", dip)
        lo, hi = self._near_span(dip)  # GPUs idle together where the dip starts, not an hour into it
        first = max(first, int(np.searchsorted(self.buckets, lo - int(self.step_s * 1e9), side="right")))
        last = max(first, min(last, int(np.searchsorted(self.buckets, hi, side="left"))))
        idle = self.idle[first:last]
        idle_max = float(np.nanmax(idle)) if np.isfinite(idle).any() else None
        write_step_ns = int(self.write_step_s * 1e9)
        writes = self.writes[int(np.searchsorted(self.write_buckets, lo - write_step_ns, side="right")):
                             int(np.searchsorted(self.write_buckets, hi, side="left"))]
        rate = (float(np.nanmax(writes)) / self.write_step_s / 1e9
                if np.isfinite(writes).any() and np.nanmax(writes) > 0 else None)
        together = idle_max is not None and idle_max >= IDLE_TOGETHER
        pause = self._fine_pause(dip) if marker is None and not together and rate is not None else None
        if marker is None and not together and pause is None:
            return None
        parts = []
        if marker:
            took = f", took {marker[1]:.0f} s" if marker[1] != 1.0 else ""
            parts.append(f"a checkpoint save started at {_clock(marker[0])} (event.checkpoint{took})")
        if together:
            bucket = first + int(np.nanargmax(idle))
            parts.append(f"{idle_max * 100:.0f} % of the GPUs idle together at {_clock(int(self.buckets[bucket]))}")
        if pause is not None:
            parts.append(_pause_words(*pause))
        if rate is not None:
            parts.append(f"writes {rate:.1f} GB/s to the file system")
        held = (marker[1] if marker and marker[1] != 1.0 else pause[1] if pause is not None
                else self._idle_seconds(first, last) if together else None)
        return "checkpoint", ", ".join(parts), held

    def _idle_seconds(self, first: int, last: int) -> float | None:
        """Seconds of the longest run of buckets in [first, last) where the GPUs were idle together (bucket widths)."""
        together = np.nan_to_num(self.idle[first:last], nan=0.0) >= IDLE_TOGETHER
        runs = _runs(together)
        return max(b - a + 1 for a, b in runs) * self.step_s if runs else None

    def _fine_pause(self, dip: _Dip) -> tuple[int, float, float, float] | None:
        """The longest run near the dip's start where at least ``IDLE_TOGETHER`` of the GPUs were idle together in
        their own samples, as (start ns, seconds, the smallest share idle in it, the samples' spacing in s), when
        it lasts ``PAUSE_MIN_S`` or more; None without such samples (``Evidence.fine``) or such a run."""
        if self.evidence.fine is None:
            return None
        span = self._near_span(dip)
        if span not in self._pauses:
            if len(self._pauses) >= FINE_READS:
                return None
            times, idle = self.evidence.fine(*span)
            self._pauses[span] = _longest_pause(to_ns(times), np.asarray(idle, dtype="float64").reshape(-1))
        return self._pauses[span]

    def _pause(self, dip: _Dip, first: int, last: int):
        pause = self._fine_pause(dip)
        if pause is None:
            return None
        return "pause", (f"{_pause_words(*pause)}: a checkpoint, an evaluation or a data stall (no checkpoint or "
                         "evaluation marker, no file-system write near it says which)"), pause[1]

    def _evaluation(self, dip: _Dip, first: int, last: int):
        marker = self._near("event.evaluation", dip)
        if marker:
            took = f", took {marker[1]:.0f} s" if marker[1] != 1.0 else ""
            return "evaluation", f"an evaluation phase started at {_clock(marker[0])} (event.evaluation{took})"
        idle, tensor, dram = (_nanmean(array[first:last]) for array in (self.idle, self.tensor, self.dram))
        if None in (idle, tensor, dram, self.tensor_usual, self.dram_usual) or not self.tensor_usual > 0:
            return None
        if (idle < EVAL_BUSY_IDLE and tensor <= self.tensor_usual * (1 - EVAL_TENSOR_DROP)
                and dram >= self.dram_usual * (1 + EVAL_DRAM_RISE)):
            return "evaluation", (f"GPUs busy ({idle * 100:.0f} % idle) with tensor activity down to "
                                  f"{tensor * 100:.0f} % (usually {self.tensor_usual * 100:.0f} %) and DRAM up to "
                                  f"{dram * 100:.0f} % (usually {self.dram_usual * 100:.0f} %): an evaluation phase")
        return None

    def _straggler(self, dip: _Dip, first: int, last: int):
        lo, hi = self._near_span(dip)
        for straggler in self.evidence.stragglers:
            stamp = to_ns([straggler.get("start")])
            if not len(stamp) or stamp[0] == np.iinfo("int64").min:
                continue
            if lo <= stamp[0] <= hi:
                why = straggler.get("reason") or "slower than its peers"
                return "straggler", f"{straggler.get('label', 'a GPU')} straggles from {_clock(int(stamp[0]))}: {why}"
        return None

    def _throttling(self, dip: _Dip, first: int, last: int):
        if last <= first:
            return None
        before = slice(max(0, first - THROTTLE_LOOKBACK), first)
        for label, state in sorted(self.throttled.items()):
            during, earlier = state[first:last] != 0, state[before] != 0
            if during.mean() < THROTTLE_DURING or (len(earlier) and earlier.mean() >= THROTTLE_BEFORE):
                continue
            onset = first + int(np.argmax(during))
            return "throttling", (f"{label} throttled ({self._throttle_kind(label, state[first:last])}) from "
                                  f"{_clock(int(self.buckets[onset]))}")
        return None

    def _throttle_kind(self, label: str, state: np.ndarray) -> str:
        if label in self.evidence.throttle_kinds:
            return self.evidence.throttle_kinds[label]
        bits = int(np.bitwise_or.reduce(state[state > 0])) if (state > 0).any() else 0
        kinds = [name for name, mask in (("power cap", POWER_BITS), ("thermal", THERMAL_BITS)) if bits & mask]
        return " and ".join(kinds) if kinds else "power cap or thermal"


def _longest_pause(times: np.ndarray, idle: np.ndarray) -> tuple[int, float, float, float] | None:
    """See :meth:`_Context._fine_pause`: ``times`` (ns, sorted here) and the share of GPUs idle at each."""
    if len(times) < 2 or len(idle) != len(times):
        return None
    order = np.argsort(times, kind="stable")
    times, idle = times[order], idle[order]
    spacing = float(np.median(np.diff(times))) / 1e9
    together = np.nan_to_num(idle, nan=0.0) >= IDLE_TOGETHER
    best = None
    for a, b in _runs(together):
        seconds = (int(times[b]) - int(times[a])) / 1e9 + spacing  # each sample stands for one spacing
        if best is None or seconds > best[1]:
            best = (int(times[a]), seconds, float(np.min(idle[a:b + 1])), spacing)
    return best if best is not None and best[1] >= PAUSE_MIN_S else None


def _pause_words(start_ns: int, seconds: float, share: float, spacing: float) -> str:
    who = "all the GPUs" if share >= 0.995 else f"{share * 100:.0f} % of the GPUs or more"
    return (f"{who} paused together for {_duration(seconds)} from {_clock(start_ns)} "
            f"(in their own samples, every {_duration(spacing)})")


def _nanmean(array: np.ndarray) -> float | None:
    return float(np.nanmean(array)) if np.isfinite(array).any() else None


def _nanmedian(array: np.ndarray) -> float | None:
    return float(np.nanmedian(array)) if np.isfinite(array).any() else None
