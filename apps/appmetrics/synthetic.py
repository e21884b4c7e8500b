"""Synthetic application series of a Megatron-LM run, consistent with the synthetic GPU telemetry of the demo.

The GPU side (``apps.telemetry.synthetic_jobs``) lays a run out on its run time: ten minutes of start-up
(data loading, no training), then training with a checkpoint every 30 minutes of run time that leaves the
SMs idle for 90 s (``run % 1800 < 90`` and ``run >= 1800``), an evaluation phase where the build's window has
one, and a power-throttled GPU from the straggler's onset. This module is the same run as the application
logs it:

* iterations start after the start-up (``STARTUP_S``, the telemetry's warm-up); each takes the nominal
  ``iteration_s`` (6.84 s by default: 250 iterations fill the 1710 s of training between two checkpoints,
  so a checkpoint falls every ~250 iterations) times a small noise (deterministic per iteration and seed);
* the iteration that spans a checkpoint start takes 90 s longer (the save blocks training): its log interval
  reads a deep dip; an ``event.checkpoint`` marker at the checkpoint start says so (value: 90 s);
* from ``straggler_after_s`` on every iteration is ``straggler_slowdown`` slower (synchronous training waits
  for the throttled GPU): throughput drops ~14 % and stays down;
* an evaluation phase (``evaluation_at_s``, ``evaluation_s`` long) holds the iteration that spans it, gives an
  ``event.evaluation`` marker and, at its end, an ``eval_loss`` row;
* every ``log_every`` iterations a row as Megatron logs it: ``iteration_s`` (mean of the interval),
  ``tokens_per_s`` (global batch x sequence length / iteration_s), ``loss`` (a noisy power-law decrease),
  ``lr`` (linear warm-up, then cosine decay), ``grad_norm`` (falling, noisy).

Rows are computed from the run's start, so any window of the run gives the same rows at the same times and
steps (the living demo appends tick by tick; the store's key replaces a row written twice).
Plain Python: no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from apps.telemetry.backends.base import APP_COLUMNS, canonical_app

STARTUP_S = 600.0  # the telemetry's warm-up: no iteration before
CHECKPOINT_EVERY_S = 1800.0
CHECKPOINT_S = 90.0
NOISE_BLOCK = 1024  # iterations per block of noise (one generator per block: a prefix never changes)


@dataclass(frozen=True)
class Run:
    """A synthetic Megatron-LM run: its start, its shape as far as throughput needs it, and what happens in it.

    Times after the start are run seconds (``straggler_after_s``, ``evaluation_at_s``), as in
    ``synthetic_jobs`` (its ``elapsed_before_s`` arithmetic)."""

    start: datetime
    global_batch: int
    seq_len: int
    iteration_s: float = 6.84
    seed: int = 0
    log_every: int = 10
    noise: float = 0.02  # relative noise of one iteration's time
    straggler_after_s: float | None = None
    straggler_slowdown: float = 0.16  # iterations this much slower: throughput ~14 % down
    evaluation_at_s: float | None = None
    evaluation_s: float = 900.0
    checkpoints: bool = True
    startup_s: float = STARTUP_S  # seconds before the first iteration
    lr_max: float = 1.5e-4
    lr_min: float = 1.5e-5
    lr_warmup_iters: int = 500
    train_iters: int = 60_000
    vocab: int = 51_200

    @property
    def tokens_per_iteration(self) -> float:
        return float(self.global_batch) * float(self.seq_len)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _noise(key: tuple[int, ...], first: int, count: int) -> np.ndarray:
    """Standard normal noise for items first..first+count-1 of stream ``key``: the same values whatever window asks."""
    if count <= 0:
        return np.array([])
    blocks = range(first // NOISE_BLOCK, (first + count - 1) // NOISE_BLOCK + 1)
    values = np.concatenate([np.random.default_rng([*key, block]).standard_normal(NOISE_BLOCK) for block in blocks])
    offset = first - (first // NOISE_BLOCK) * NOISE_BLOCK
    return values[offset:offset + count]


def checkpoint_starts(until_s: float, evaluation: tuple[float, float] | None = None) -> list[float]:
    """The run seconds at which checkpoints start up to ``until_s``: every 30 min from 30 min on, as the
    telemetry's idle windows (none while the run evaluates)."""
    starts = []
    moment = CHECKPOINT_EVERY_S
    while moment <= until_s:
        if evaluation is None or not evaluation[0] <= moment < evaluation[1]:
            starts.append(moment)
        moment += CHECKPOINT_EVERY_S
    return starts


def iterations(run: Run, until_s: float) -> tuple[np.ndarray, np.ndarray, list[tuple[float, int, str, float]]]:
    """(end time of each iteration in run seconds, its duration, markers (run s, step, name, value)) for the
    iterations that end by ``until_s``."""
    evaluation = (run.evaluation_at_s, run.evaluation_at_s + run.evaluation_s) if run.evaluation_at_s is not None else None
    pauses = [(moment, CHECKPOINT_S, "event.checkpoint") for moment in checkpoint_starts(until_s, evaluation)] \
        if run.checkpoints else []
    if evaluation is not None:
        pauses.append((evaluation[0], run.evaluation_s, "event.evaluation"))
    pauses.sort()
    estimate = int(max(0.0, until_s - run.startup_s) / (run.iteration_s * 0.9)) + 2
    noise = _noise((run.seed, 1), 0, estimate)
    ends, durations, markers = [], [], []
    clock, index, pause = run.startup_s, 0, 0
    while index < len(noise):
        duration = run.iteration_s * (1.0 + run.noise * float(noise[index]))
        if run.straggler_after_s is not None and clock >= run.straggler_after_s:
            duration *= 1.0 + run.straggler_slowdown
        while pause < len(pauses) and pauses[pause][0] < clock + duration:
            moment, length, name = pauses[pause]
            if moment >= clock:  # the save (or the evaluation) holds this iteration
                markers.append((moment, index, name, length))
                duration += length
            pause += 1
        if clock + duration > until_s:
            break
        clock += duration
        ends.append(clock)
        durations.append(duration)
        index += 1
    return np.array(ends), np.array(durations), markers


def _lr(run: Run, step: np.ndarray) -> np.ndarray:
    warm = run.lr_max * step / max(1, run.lr_warmup_iters)
    progress = np.clip((step - run.lr_warmup_iters) / max(1, run.train_iters - run.lr_warmup_iters), 0.0, 1.0)
    cosine = run.lr_min + 0.5 * (run.lr_max - run.lr_min) * (1.0 + np.cos(math.pi * progress))
    return np.where(step < run.lr_warmup_iters, warm, cosine)


def _loss(run: Run, step: np.ndarray, noise: np.ndarray) -> np.ndarray:
    start = math.log(run.vocab)  # uniform over the vocabulary before training
    floor = 1.75
    return (floor + (start - floor) * (1.0 + step / 120.0) ** -0.55) * (1.0 + 0.012 * noise)


def rows(run: Run, start: datetime | None = None, end: datetime | None = None) -> pd.DataFrame:
    """The run's application rows with ``start < ts <= end`` (the whole run up to ``end``; ``start`` None:
    from the run's start) as a long frame: ts (UTC), name, step (Int64), value."""
    origin = _aware(run.start)
    end = _aware(end) if end is not None else origin
    until_s = (end - origin).total_seconds()
    ends, durations, markers = iterations(run, until_s)
    records: list[tuple[float, str, int, float]] = []
    every = run.log_every
    logged = np.arange(every - 1, len(ends), every)
    if len(logged):
        step = logged + 1
        interval = durations[:len(logged) * every].reshape(len(logged), every).mean(axis=1)
        noise_loss, noise_grad = _noise((run.seed, 2), 0, len(logged)), _noise((run.seed, 3), 0, len(logged))
        loss = _loss(run, step.astype(float), noise_loss)
        grad = 0.9 + 3.0 * np.exp(-step / 300.0) + 0.08 * np.abs(noise_grad)
        lr = _lr(run, step.astype(float))
        for column, values in (("iteration_s", interval), ("tokens_per_s", run.tokens_per_iteration / interval),
                               ("loss", loss), ("lr", lr), ("grad_norm", grad)):
            records.extend((float(ends[i]), column, int(s), float(v)) for i, s, v in zip(logged, step, values))
    for moment, index, name, length in markers:
        records.append((float(moment), name, int(index), float(length)))
        if name == "event.evaluation" and moment + length <= until_s:
            noise = np.random.default_rng([run.seed, 11, index]).standard_normal(1)
            value = float(_loss(run, np.array([float(index)]), noise)[0]) + 0.04
            records.append((float(moment + length), "eval_loss", int(index), value))
    frame = pd.DataFrame(records, columns=["seconds", "name", "step", "value"])
    frame["ts"] = pd.Timestamp(origin) + pd.to_timedelta(frame["seconds"].round(3), unit="s")
    frame["ts"] = frame["ts"].dt.tz_convert("UTC").dt.as_unit("ns")
    keep = frame["ts"] <= pd.Timestamp(end)
    if start is not None:
        keep &= frame["ts"] > pd.Timestamp(_aware(start))
    frame = frame[keep].sort_values(["name", "ts"], kind="stable").reset_index(drop=True)
    frame["step"] = frame["step"].astype("Int64")
    return frame[["ts", "name", "step", "value"]]


def app_frame(run: Run, cluster: str, job_id: int, start: datetime | None = None,
              end: datetime | None = None) -> pd.DataFrame:
    """``rows`` as a canonical job-series frame (APP_COLUMNS) of job ``cluster``/``job_id``."""
    frame = rows(run, start, end)
    frame = frame.assign(cluster=cluster, job_id=int(job_id))
    return canonical_app(frame[APP_COLUMNS])


def scaling_iteration_s(gpus: int, base_gpus: int, per_gpu_tokens_s: float, efficiency: float,
                        global_batch: int, seq_len: int) -> float:
    """The iteration time of a strong-scaling run on ``gpus`` GPUs whose per-GPU throughput is ``efficiency``
    times the smallest run's ``per_gpu_tokens_s`` (same global batch: the work per iteration is fixed)."""
    if gpus <= 0 or base_gpus <= 0 or per_gpu_tokens_s <= 0 or not 0 < efficiency <= 1:
        raise ValueError(f"scaling_iteration_s: gpus {gpus}, base {base_gpus}, per-GPU {per_gpu_tokens_s}, "
                         f"efficiency {efficiency}: need positive counts and 0 < efficiency <= 1")
    return global_batch * seq_len / (per_gpu_tokens_s * efficiency * gpus)


def run_seconds(run: Run, moment: datetime) -> float:
    """Seconds of the run at ``moment``."""
    return (_aware(moment) - _aware(run.start)).total_seconds()


def moment_of(run: Run, seconds: float) -> datetime:
    """The time at ``seconds`` of the run."""
    return _aware(run.start) + timedelta(seconds=seconds)
