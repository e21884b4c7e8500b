"""A synthetic job's host side, for the demo and the tests: a training run whose data loader saturates now and then.

``data_loader_job(hosts, job_id, start, seconds)`` gives what the collector and the training loop would have sent
for a GH200 job (4 GPUs per node, 4 Grace NUMA domains):

* ``app``: the application series (``iteration_s``, ``tokens_per_s``, ``event.checkpoint`` markers), one point per
  iteration; during the *stalls* (``stall_share`` of the run, in stretches of ``stall_s``) an iteration takes
  ``stall_factor`` times as long; a checkpoint (``checkpoint_every_s``) holds one iteration for ``checkpoint_s``.
* ``host``: host samples every ``interval_s`` (``HOST_COLUMNS``): CPU busy of the node and its NUMA domains, memory,
  page cache (``page_cache_gpu``: {(host, gpu): bytes} of page cache resident in GPU memory), the step's CPU, the
  ranks' and the data-loader workers' CPU (1.0 during the stalls: the workers saturated; 0.45 otherwise).
* ``gpu``: DCGM samples of GR engine, SM, tensor and DRAM activity (1001, 1002, 1004, 1005) and GPU utilisation (203)
  per GPU: idle (0.05) during the stalls and
  the checkpoints, busy (0.75) otherwise.

``loader_bound=False`` gives the same dips without the host's part (the stalls' workers stay at 0.45): the dips of
such a job are not the host's. Deterministic for a seed. Plain Python: no Django (numpy, pandas).
"""
from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd

GPUS_PER_NODE, NUMA_DOMAINS = 4, 4
GIB = 1024 ** 3
HOST_COLUMNS = ["ts", "cluster", "host", "domain", "field", "value"]


def _stalled(seconds: np.ndarray, stall_share: float, stall_s: float, period_s: float) -> np.ndarray:
    """Whether each moment (run seconds) falls in a stall: the first stall_share of every period."""
    return (seconds % period_s) < stall_share * period_s if stall_share > 0 else np.zeros(len(seconds), dtype=bool)


def data_loader_job(hosts: list[str], job_id: int, start: datetime, seconds: float, *, cluster: str = "alps",
                    iteration_s: float = 4.0, stall_share: float = 0.4, stall_s: float = 240.0, stall_factor: float = 2.5,
                    checkpoint_every_s: float | None = None, checkpoint_s: float = 45.0, interval_s: float = 10.0,
                    loader_bound: bool = True, page_cache_gpu: dict | None = None, seed: int = 39) -> dict:
    rng = np.random.default_rng(seed)
    period = stall_s / stall_share if stall_share > 0 else seconds + 1
    # iterations: end times (run seconds) and durations
    ends, durations, markers = [], [], []
    clock, next_checkpoint = 0.0, checkpoint_every_s
    while clock < seconds:
        stalled = _stalled(np.array([clock]), stall_share, stall_s, period)[0]
        duration = iteration_s * (stall_factor if stalled else 1.0) * (1 + 0.02 * float(rng.standard_normal()))
        saves = next_checkpoint is not None and clock + duration >= next_checkpoint
        if saves:
            duration += checkpoint_s
        if clock + duration > seconds:
            break
        if saves:
            markers.append((next_checkpoint, len(ends), checkpoint_s))
            next_checkpoint += checkpoint_every_s
        clock += duration
        ends.append(clock)
        durations.append(duration)
    ends, durations = np.array(ends), np.array(durations)
    at = pd.Timestamp(start)
    tokens = 4 * 1024 * 1024 / durations
    times = [at + pd.Timedelta(seconds=float(s)) for s in ends]
    app = pd.DataFrame({"ts": times * 2, "name": ["iteration_s"] * len(ends) + ["tokens_per_s"] * len(ends),
                        "step": list(range(1, len(ends) + 1)) * 2, "value": [*durations, *tokens]})
    if markers:
        app = pd.concat([app, pd.DataFrame({"ts": [at + pd.Timedelta(seconds=m[0]) for m in markers],
                                            "name": "event.checkpoint", "step": [m[1] for m in markers],
                                            "value": [m[2] for m in markers]})], ignore_index=True)
    app["cluster"], app["job_id"] = cluster, job_id
    # the host and the GPUs every interval
    grid = np.arange(0.0, seconds, interval_s)
    stall = _stalled(grid, stall_share, stall_s, period)
    saving = np.zeros(len(grid), dtype=bool)
    for moment, _, length in markers:
        saving |= (grid >= moment - interval_s) & (grid < moment + length)
    loader = np.where(stall & loader_bound, 1.0, 0.45)
    sm = np.where(stall | saving, 0.05, 0.75)
    stamps = [at + pd.Timedelta(seconds=float(s)) for s in grid]
    host_rows, gpu_rows = [], []
    page_cache_gpu = page_cache_gpu or {}
    domain = f"job{job_id}.0"
    for host in hosts:
        jitter = rng.normal(0, 0.01, len(grid))
        busy = np.clip(np.where(stall & loader_bound, 0.62, 0.35) + jitter, 0, 1)
        values = {("node", "host_cpu_busy"): busy, ("node", "host_cpu_iowait"): np.full(len(grid), 0.01),
                  ("node", "host_mem_used"): np.full(len(grid), 180.0 * GIB) + jitter * GIB,
                  ("node", "host_mem_total"): np.full(len(grid), 480.0 * GIB),
                  ("node", "host_page_cache"): np.full(len(grid), 60.0 * GIB),
                  (domain, "host_job_cpu"): np.clip(busy + 0.05, 0, 1),
                  (domain, "host_dataloader_cpu"): np.clip(loader + jitter, 0, 1),
                  (domain, "host_rank_cpu"): np.full(len(grid), 0.9) + jitter,
                  (domain, "host_dataloader_workers"): np.full(len(grid), 32.0)}
        for numa in range(NUMA_DOMAINS):
            values[(f"numa{numa}", "host_cpu_busy")] = np.clip(busy + 0.02 * numa, 0, 1)
        for gpu in range(GPUS_PER_NODE):
            cached = float(page_cache_gpu.get((host, gpu), 0.3 * GIB))
            values[(f"gpu{gpu}", "host_gpu_page_cache")] = np.full(len(grid), cached)
            values[(f"gpu{gpu}", "host_gpu_host_alloc")] = np.full(len(grid), 1.5 * GIB)
            # GR engine, SM, tensor and DRAM activity as DCGM's profiling fields give them (a training step's mix), so
            # the job has a saturation score, not "utilisation only", and its dips show in it
            for field, level in ((1001, np.clip(sm + 0.03, 0, 1)), (1002, sm), (1004, sm * 0.55), (1005, sm * 0.35),
                                 (203, sm * 100)):
                gpu_rows.append(pd.DataFrame({"ts": stamps, "cluster": cluster, "host": host, "gpu": gpu,
                                              "uuid": f"GPU-{host}-{gpu}", "field": field, "value": level}))
        for (dom, field), series in values.items():
            host_rows.append(pd.DataFrame({"ts": stamps, "cluster": cluster, "host": host, "domain": dom,
                                           "field": field, "value": np.asarray(series, dtype="float64")}))
    host = pd.concat(host_rows, ignore_index=True)[HOST_COLUMNS] if host_rows else pd.DataFrame(columns=HOST_COLUMNS)
    gpus = pd.concat(gpu_rows, ignore_index=True) if gpu_rows else pd.DataFrame()
    return {"app": app, "host": host, "gpu": gpus, "iteration_ends": ends, "iteration_s": durations,
            "markers": markers}


def end_of(start: datetime, seconds: float) -> datetime:
    return start + timedelta(seconds=seconds)
