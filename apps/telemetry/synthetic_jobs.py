"""Synthetic DCGM telemetry for demo jobs: realistic phases and planted problems, deterministic per seed.

Three profiles, in DCGM's ids and units (ratios 0..1, bytes/s, MHz, W, mJ, °C, MiB, percent for 203):

* ``megatron`` — a synchronous data-parallel training run: warm-up with data loading over C2C, a
  compute-bound training phase (tensor pipes ~0.6, SM activity ~0.9, NVLink bursts from the tensor-
  parallel all-reduces, ~600 W), a checkpoint every 30 minutes (a minute and a half of idle SMs and
  heavy C2C writes), and, in windows of an hour or more, an evaluation phase at the end that leans on
  memory. All GPUs move in
  lockstep (one shared per-step factor) with small independent noise. Planted:
  ``throttled`` — one GPU pinned at a lower power cap: SM clock ~28 % below its peers, the SW power-cap
  bit (0x4) in field 112, less tensor work; because training is synchronous every other GPU waits a
  little (slightly lower activity) — the straggler; from ``Planted.throttled_after_s`` seconds of the run
  on when given (its onset: healthy before), else for the whole training;
  ``hot`` — one GPU 15–20 °C hotter than its peers, HBM hotter still, now and then the SW thermal
  slowdown bit (0x20) with a clock dip;
  ``slow_nic`` — one node whose network link is degraded: the NIC is not a DCGM field, so it shows as
  that node's four GPUs waiting in the collectives: less tensor and SM activity and lower NVLink and
  C2C rates while training.
* ``memory_bound`` — DRAM near its practical ceiling (~0.78), little tensor work, high GPU
  utilisation: busy but bandwidth-bound.
* ``idle_gpus`` — on every node only GPU 0 works; the other GPUs sit idle (0 % utilisation, idle
  power and clocks) for the whole job.

``job_chunks`` yields canonical frames a few nodes at a time, so the 512-GPU case (about 9 million
samples) is written without holding it all in memory. A window later in a run (``elapsed_before_s``)
continues the run's phases (checkpoints every 30 minutes of the run) and its energy counter, so the
living demo can generate a running job tick by tick: with the same hosts the planted problems stay on
the same GPUs. ``profile_for`` picks the profile a demo job's name suggests. Plain Python: no Django.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterator

import numpy as np
import pandas as pd

from .backends.base import COLUMNS

FIELDS = (1001, 1002, 1003, 1004, 1005, 1011, 1012, 1076, 1078, 203, 100, 113, 112, 150, 140, 155, 156, 252)
MAX_SM_CLOCK = 1980.0
NVLINK_PEAK = 450e9  # bytes/s per direction
C2C_PEAK = 450e9
POWER_CAP_BIT, SW_THERMAL_BIT = 0x4, 0x20
# The energy counter (156) of a window later in a run starts this many W x the seconds before it above
# the counter's start: the board's ceiling, so the counter never goes back between windows.
ENERGY_NOMINAL_W = 700.0
PROFILES = ("megatron", "memory_bound", "idle_gpus", "comm_heavy")
# A communication-heavy run (mixture-of-experts all-to-all): the megatron profile with this much more NVLink
# traffic, clipped at the link's peak (about 0.84 of it while training).
COMM_HEAVY_NVLINK = 3.8


@dataclass(frozen=True)
class Planted:
    """Where the problems of a ``megatron`` run are (host, GPU index)."""

    throttled: tuple[str, int] | None = None
    hot: tuple[str, int] | None = None
    slow_nic: str | None = None
    # Seconds of the run before which the throttled GPU is healthy (the straggler's onset); None: throttled throughout.
    throttled_after_s: float | None = None

    def as_dict(self) -> dict:
        return {"throttled": self.throttled, "hot": self.hot, "slow_nic": self.slow_nic,
                "throttled_after_s": self.throttled_after_s}


def profile_for(job_name: str) -> str:
    """The profile a demo job's name suggests: pretraining and profiling runs train like Megatron (no planted
    problem unless given), fine-tuning and evaluation are memory-bound, data preparation leaves GPUs idle,
    mixture-of-experts runs ("moe-...") fill their links."""
    name = (job_name or "").lower()
    if name.startswith(("finetune", "eval")):
        return "memory_bound"
    if name.startswith("data-prep"):
        return "idle_gpus"
    if name.startswith("moe-"):
        return "comm_heavy"
    return "megatron"


def default_planted(hosts: list[str], throttled_after_s: float | None = None) -> Planted:
    """Spread over the job so they sit on different nodes (and, on the demo machine, groups); the throttled GPU
    from ``throttled_after_s`` seconds of the run on when given (see ``straggler_onset_s``)."""
    if len(hosts) < 3:
        return Planted(throttled=(hosts[0], 2) if hosts else None, throttled_after_s=throttled_after_s)
    return Planted(throttled=(hosts[len(hosts) // 3], 2), hot=(hosts[(2 * len(hosts)) // 3], 1), slow_nic=hosts[-5 % len(hosts)],
                   throttled_after_s=throttled_after_s)


def straggler_onset_s(elapsed_before_s: float, duration_s: float) -> float:
    """Where the demo puts the straggler's onset in a window of a run (run seconds): an hour into the window,
    or a third of it when shorter, so the throughput dip at the onset is seen and the straggler lasts long
    enough (two thirds of the window, at least the saturation detector's five minutes in a 15-minute window)
    to be found."""
    return float(elapsed_before_s) + min(3600.0, float(duration_s) / 3.0)


@dataclass
class _Timeline:
    seconds: np.ndarray  # since the start
    warmup: np.ndarray
    train: np.ndarray
    checkpoint: np.ndarray
    evaluation: np.ndarray
    lockstep: np.ndarray  # shared per-step factor around 1
    extra: dict = field(default_factory=dict)
    elapsed_before_s: float = 0.0  # seconds of the run before the window


def _timeline(duration_s: float, interval_s: float, rng: np.random.Generator, elapsed_before_s: float) -> _Timeline:
    seconds = np.arange(0, duration_s, interval_s, dtype=float)
    absolute = seconds + elapsed_before_s  # where the window sits in the whole run
    warmup = absolute < 600
    # the last 15 minutes evaluate, in windows long enough to have trained first
    evaluation = (seconds >= duration_s - 900) & (duration_s >= 3600)
    checkpoint = ~warmup & ~evaluation & ((absolute % 1800) < 90) & (absolute >= 1800)
    train = ~warmup & ~evaluation & ~checkpoint
    lockstep = np.clip(rng.normal(1.0, 0.035, len(seconds)), 0.85, 1.1)
    return _Timeline(seconds, warmup, train, checkpoint, evaluation, lockstep, elapsed_before_s=float(elapsed_before_s))


def _phase(timeline: _Timeline, warmup, train, checkpoint, evaluation) -> np.ndarray:
    return (timeline.warmup * warmup + timeline.train * train + timeline.checkpoint * checkpoint
            + timeline.evaluation * evaluation).astype(float)


def _megatron(hosts, gpus_per_host, timeline, rng, planted: Planted) -> dict[int, np.ndarray]:
    g, t = len(hosts) * gpus_per_host, len(timeline.seconds)
    noise = lambda scale: rng.normal(0, scale, (g, t))  # noqa: E731 - small local helper
    step = timeline.lockstep[None, :]
    tensor = _phase(timeline, 0.05, 0.62, 0.03, 0.33)[None, :] * step + noise(0.015)
    sm = _phase(timeline, 0.22, 0.92, 0.08, 0.80)[None, :] * np.minimum(step, 1.0) + noise(0.01)
    dram = _phase(timeline, 0.05, 0.42, 0.04, 0.60)[None, :] * step + noise(0.015)
    nvlink = _phase(timeline, 0.01, 0.22, 0.0, 0.08)[None, :] * NVLINK_PEAK * step * (1 + noise(0.05))
    c2c = _phase(timeline, 0.12, 0.01, 0.28, 0.02)[None, :] * C2C_PEAK * (1 + noise(0.1))
    util = _phase(timeline, 45, 99, 28, 97)[None, :] + noise(0.6)
    clock = np.full((g, t), MAX_SM_CLOCK * 0.975) + noise(8)
    throttle = np.zeros((g, t))
    row = {(host, gpu): i * gpus_per_host + gpu for i, host in enumerate(hosts) for gpu in range(gpus_per_host)}
    training = timeline.train | timeline.evaluation
    # the straggler's effects, from its onset on (the whole training without one)
    straggling = training
    if planted.throttled_after_s is not None:
        straggling = training & (timeline.seconds + timeline.elapsed_before_s >= planted.throttled_after_s)
    if planted.throttled:
        r = row[planted.throttled]
        clock[r, straggling] *= 0.72
        tensor[r, straggling] *= 0.9
        throttle[r, straggling] = POWER_CAP_BIT
        # synchronous steps: everybody else waits a little for the straggler
        others = np.ones(g, dtype=bool)
        others[r] = False
        tensor[np.ix_(others, straggling)] *= 0.96
        sm[np.ix_(others, straggling)] *= 0.97
    if planted.slow_nic:
        rows = [row[(planted.slow_nic, gpu)] for gpu in range(gpus_per_host)]
        tensor[np.ix_(rows, training)] *= 0.85
        sm[np.ix_(rows, training)] *= 0.9
        nvlink[np.ix_(rows, training)] *= 0.8
        c2c[np.ix_(rows, training)] *= 0.7
    power = 110 + 520 * np.clip(0.6 * tensor / 0.62 + 0.25 * dram / 0.42 + 0.15 * sm / 0.92, 0, 1.15) + noise(6)
    temp = 32 + 0.055 * power + noise(0.6)
    hot_mask = None
    if planted.throttled:
        r = row[planted.throttled]
        power[r, straggling] = np.minimum(power[r, straggling], 450 + rng.normal(0, 3, training.sum())[straggling[training]])
    if planted.hot:
        r = row[planted.hot]
        temp[r] += 17
        hot_mask = training & (rng.random(t) < 0.1)
        throttle[r, hot_mask] = SW_THERMAL_BIT
        clock[r, hot_mask] *= 0.93
    memory_temp = temp + 6 + noise(0.5)
    if hot_mask is not None:
        memory_temp[row[planted.hot]] += 3
    return _device_fields(tensor, sm, dram, nvlink, c2c, util, clock, throttle, power, temp, memory_temp,
                          fb=_phase(timeline, 30000, 74000, 74000, 76000)[None, :] + noise(50), interval=_interval(timeline),
                          elapsed_before_s=timeline.elapsed_before_s)


def _memory_bound(hosts, gpus_per_host, timeline, rng) -> dict[int, np.ndarray]:
    g, t = len(hosts) * gpus_per_host, len(timeline.seconds)
    noise = lambda scale: rng.normal(0, scale, (g, t))  # noqa: E731
    busy = _phase(timeline, 0.3, 1.0, 0.2, 1.0)[None, :]
    dram = 0.78 * busy + noise(0.01)
    tensor = 0.08 * busy + noise(0.01)
    sm = 0.85 * busy + noise(0.01)
    power = 120 + 300 * busy + noise(5)
    temp = 32 + 0.055 * power + noise(0.5)
    return _device_fields(tensor, sm, dram, 0.02 * NVLINK_PEAK * busy * (1 + noise(0.05)), 0.01 * C2C_PEAK * (1 + noise(0.1)),
                          98 * busy + noise(0.5), np.full((g, t), MAX_SM_CLOCK * 0.985) + noise(5), np.zeros((g, t)),
                          power, temp, temp + 8, fb=np.full((g, t), 88000.0) + noise(20), interval=_interval(timeline),
                          elapsed_before_s=timeline.elapsed_before_s)


def _idle_gpus(hosts, gpus_per_host, timeline, rng) -> dict[int, np.ndarray]:
    g, t = len(hosts) * gpus_per_host, len(timeline.seconds)
    noise = lambda scale: rng.normal(0, scale, (g, t))  # noqa: E731
    working = (np.arange(g) % gpus_per_host == 0)[:, None]
    tensor = np.where(working, 0.45, 0.0) + np.abs(noise(0.005))
    sm = np.where(working, 0.7, 0.0) + np.abs(noise(0.005))
    dram = np.where(working, 0.3, 0.0) + np.abs(noise(0.005))
    power = np.where(working, 480.0, 78.0) + noise(3)
    clock = np.where(working, MAX_SM_CLOCK * 0.975, 345.0) + noise(3)
    util = np.where(working, 96.0, 0.0) + np.abs(noise(0.3)) * working
    temp = 30 + 0.06 * power + noise(0.4)
    return _device_fields(tensor, sm, dram, np.where(working, 0.02, 0.0) * NVLINK_PEAK, np.where(working, 0.01, 0.0) * C2C_PEAK,
                          util, clock, np.where(working, 0, 0x1), power, temp, temp + 5,
                          fb=np.where(working, 60000.0, 600.0) + np.abs(noise(10)), interval=_interval(timeline),
                          elapsed_before_s=timeline.elapsed_before_s)


def _interval(timeline: _Timeline) -> float:
    return float(timeline.seconds[1] - timeline.seconds[0]) if len(timeline.seconds) > 1 else 10.0


def _device_fields(tensor, sm, dram, nvlink, c2c, util, clock, throttle, power, temp, memory_temp, *, fb, interval,
                   elapsed_before_s=0.0):
    ratio = lambda a: np.clip(a, 0.0, 1.0)  # noqa: E731
    shape = tensor.shape
    sm, dram, nvlink, c2c, util, clock, throttle, power, temp, memory_temp, fb = (
        np.broadcast_to(np.asarray(a, dtype=float), shape) for a in (sm, dram, nvlink, c2c, util, clock, throttle, power, temp,
                                                                      memory_temp, fb))
    g = shape[0]
    energy_start = np.linspace(4.1e9, 6.3e9, g)[:, None]  # mJ since the driver loaded: differs per GPU
    energy_start = energy_start + elapsed_before_s * ENERGY_NOMINAL_W * 1000.0
    power = np.clip(power, 60, 700)
    sm = ratio(sm)
    return {
        1001: ratio(sm + 0.04), 1002: sm, 1003: ratio(sm * 0.38), 1004: ratio(tensor), 1005: ratio(dram),
        1011: np.clip(nvlink, 0, NVLINK_PEAK), 1012: np.clip(nvlink * 0.98, 0, NVLINK_PEAK),
        1076: np.clip(c2c * 0.4, 0, C2C_PEAK), 1078: np.clip(c2c, 0, C2C_PEAK),
        203: np.clip(np.round(util), 0, 100), 100: np.round(np.clip(clock, 200, MAX_SM_CLOCK)),
        113: np.full_like(sm, MAX_SM_CLOCK), 112: throttle.astype(float), 150: np.round(temp), 140: np.round(memory_temp),
        155: power, 156: energy_start + np.cumsum(power * interval * 1000.0, axis=1), 252: np.round(np.clip(fb, 0, 97000)),
    }


def job_chunks(profile: str, hosts: list[str], start: datetime, duration_s: float, *, interval_s: float = 10.0,
               cluster: str = "alps", gpus_per_host: int = 4, seed: int = 0, planted: Planted | None = None,
               elapsed_before_s: float = 0.0, hosts_per_chunk: int = 32) -> Iterator[pd.DataFrame]:
    """Canonical frames for the job, ``hosts_per_chunk`` nodes at a time."""
    rng = np.random.default_rng(seed)
    timeline = _timeline(duration_s, interval_s, rng, elapsed_before_s)
    if profile == "megatron":
        values = _megatron(hosts, gpus_per_host, timeline, rng, planted or default_planted(hosts))
    elif profile == "memory_bound":
        values = _memory_bound(hosts, gpus_per_host, timeline, rng)
    elif profile == "idle_gpus":
        values = _idle_gpus(hosts, gpus_per_host, timeline, rng)
    elif profile == "comm_heavy":
        values = _megatron(hosts, gpus_per_host, timeline, rng, planted or Planted())
        for link in (1011, 1012):
            values[link] = np.clip(values[link] * COMM_HEAVY_NVLINK, 0, NVLINK_PEAK)
    else:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    times = pd.DatetimeIndex(pd.Timestamp(start).tz_convert("UTC") + pd.to_timedelta(timeline.seconds, unit="s")).as_unit("ns")
    fields = np.array(sorted(values), dtype="int32")
    t = len(times)
    for first in range(0, len(hosts), hosts_per_chunk):
        chunk_hosts = hosts[first:first + hosts_per_chunk]
        rows = slice(first * gpus_per_host, (first + len(chunk_hosts)) * gpus_per_host)
        g = len(chunk_hosts) * gpus_per_host
        cube = np.stack([values[f][rows] for f in fields], axis=1)  # (g, fields, t)
        n = cube.size
        host_names = np.repeat(np.asarray(chunk_hosts, dtype=object), gpus_per_host)
        frame = pd.DataFrame({
            "ts": np.tile(times.to_numpy(), g * len(fields)),
            "cluster": cluster,
            "host": np.repeat(host_names, len(fields) * t),
            "gpu": np.repeat(np.tile(np.arange(gpus_per_host, dtype="int16"), len(chunk_hosts)), len(fields) * t),
            "uuid": np.repeat(np.array([f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{cluster}.{h}.gpu{i}')}" for h, i in
                                        zip(host_names, np.tile(np.arange(gpus_per_host), len(chunk_hosts)))], dtype=object),
                              len(fields) * t),
            "field": np.tile(np.repeat(fields, t), g),
            "value": cube.reshape(n),
        })
        frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
        yield frame[COLUMNS]


def window_of_run(started: datetime, now: datetime, hours: float = 3.0) -> tuple[datetime, float, float]:
    """The last ``hours`` of a run (or all of it when shorter): (window start, duration s, seconds of the
    run before the window)."""
    start = max(started, now - timedelta(hours=hours))
    return start, (now - start).total_seconds(), (start - started).total_seconds()
