"""Goodput of a training campaign: the share of its allocated GPU-hours that produced kept training progress, and
where the rest went, in named parts. Plain Python: no Django.

A campaign is a chain of allocations (Slurm jobs) training one run. Each allocation is read on its own time line
from what the portal measured (:class:`Allocation`):

``start ── startup ── restore ── first progress ══ training ══ last progress ── tail ── end``

* **startup**: from the allocation's start to its first iteration (the first row of application metrics with an
  iteration number), less the restore;
* **restore**: the checkpoint load of an allocation that resumed, as its ``event.restore`` marker measured it (or an
  ``event.restart`` marker whose value is the seconds it took); without one it stays in startup;
* **checkpoint**: every checkpoint save's stall (``event.checkpoint`` markers: start and seconds), wherever it falls;
* **lost work**: iterations that were computed and then thrown away because the run went back to an earlier
  checkpoint: the time from the iteration the next allocation resumed from (or, for a last allocation that ended
  badly, its last completed checkpoint) to the last progress, less the checkpoint stalls inside it;
* **hang**: for an allocation that ended badly, the time from its last progress to its end (less a checkpoint save
  in it): no iteration finished; for a running allocation, the time since its last progress when it exceeds
  ``HANG_AFTER_S``;
* **shutdown**: the same tail of an allocation that ended by design (the exit after the final checkpoint);
* **dips**: throughput dips (appmetrics' efficiency events) of kinds ``DIP_KINDS`` in the kept training, each as its
  length times its depth (``dip``: 1 − throughput/usual);
* **idle**: GPUs the saturation scoring found idle (``apps.saturation.waste``'s rule: busy under 5 % of the steady
  state) over the rest of the kept training, as ``idle_share`` of the allocation's GPUs;
* **bad nodes**: a whole allocation that failed before its first iteration on nodes vetting failed, and the GPUs on
  nodes vetting failed (waste's rule: ``failed_node_share``) over the rest of the kept training.

What is left of the kept training is **productive**. The parts and productive sum to the allocation exactly. The
time between allocations (the queue) is not allocated: it is shown apart as ``queue_hours``, never as badput.

An iteration is **kept** when no later allocation resumed from a checkpoint older than it. An allocation resumes
from its restore marker's step when it has one, else from the newest completed checkpoint of the earlier allocations
below its first iteration. A checkpoint is **completed** when training went on after it in the same allocation, or
the allocation ended by design after the save's end. The last allocation of a campaign that ended badly keeps its
work up to its last completed checkpoint (the rest is lost unless a later allocation proves otherwise).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

PARTS = ("startup", "restore", "checkpoint", "lost_work", "hang", "dips", "idle", "bad_nodes", "shutdown")
PART_WORDS = {
    "startup": "start-up: from the allocation's start to its first iteration (less a measured checkpoint load)",
    "restore": "restore: loading the checkpoint after a restart (the event.restore marker)",
    "checkpoint": "checkpoint stalls: the time checkpoint saves held training (event.checkpoint markers)",
    "lost_work": "work lost: iterations computed after the checkpoint the run later resumed from, thrown away",
    "hang": "hangs: from the last progress to the end of an allocation that ended badly (no iteration finished)",
    "dips": "throughput dips: stragglers, throttling, pauses and unexplained dips, as length times depth",
    "idle": "idle GPUs: GPUs busy under 5 % of the steady state (the saturation waste rule)",
    "bad_nodes": "bad nodes: allocations that failed on nodes vetting failed before their first iteration, and GPUs "
                 "on nodes vetting failed",
    "shutdown": "shutdown: from the last progress to the end of an allocation that ended by design",
}
GOODPUT_WORDS = ("Goodput is the share of the allocated GPU-hours that produced kept training progress: iterations no "
                 "later restart threw away, less checkpoint stalls, throughput dips and idle GPUs. The time between "
                 "allocations (the queue) is not allocated and is shown apart, never as badput.")
DIP_KINDS = ("straggler", "throttling", "pause", "unknown")  # checkpoint and restart dips are counted in their parts
HANG_AFTER_S = 600.0  # a running allocation's time since its last progress counts as a hang past this


@dataclass(frozen=True)
class Progress:
    ts: datetime
    step: int


@dataclass(frozen=True)
class Checkpoint:
    ts: datetime  # when the save began
    step: int | None
    seconds: float  # how long it held training


@dataclass(frozen=True)
class Restore:
    ts: datetime
    step: int | None  # the iteration loaded, when the marker says
    seconds: float | None  # how long the load took, when the marker says


@dataclass(frozen=True)
class Dip:
    start: datetime
    end: datetime | None
    kind: str
    dip: float  # 0-1: 1 - throughput / usual


@dataclass(frozen=True)
class Allocation:
    key: str  # "cluster/job_id"
    start: datetime | None
    end: datetime | None  # None while it runs (then ``now``)
    gpus: int
    nodes: int = 0
    progress: tuple[Progress, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    restore: Restore | None = None
    dips: tuple[Dip, ...] = ()
    idle_share: float = 0.0  # share of the GPUs idle (waste rule)
    failed_node_share: float = 0.0  # share of the GPUs on nodes vetting failed (waste rule)
    failed: bool = False  # ended other than by design (a failure of the campaign)
    on_bad_nodes: bool = False  # failed with a node vetting failed among its nodes
    running: bool = False


@dataclass
class AllocationAccount:
    key: str
    start: datetime | None
    end: datetime | None
    gpus: int
    hours: float  # wall hours allocated
    allocated_gpu_hours: float
    productive_gpu_hours: float
    badput: dict[str, float]
    queue_hours_before: float | None  # the gap since the previous allocation ended
    resumed_from: int | None  # the iteration it resumed from (None: it started fresh or never trained)
    first_step: int | None
    last_step: int | None
    kept_step: int | None  # the last iteration of it that was kept
    last_checkpoint: int | None  # its last completed checkpoint's iteration

    @property
    def goodput(self) -> float | None:
        return self.productive_gpu_hours / self.allocated_gpu_hours if self.allocated_gpu_hours > 0 else None


@dataclass
class CampaignAccount:
    allocations: list[AllocationAccount]
    allocated_gpu_hours: float
    productive_gpu_hours: float
    badput: dict[str, float]
    queue_hours: float
    older_restarts: list[dict] = field(default_factory=list)  # resumed from a checkpoint older than the newest

    @property
    def goodput(self) -> float | None:
        return self.productive_gpu_hours / self.allocated_gpu_hours if self.allocated_gpu_hours > 0 else None


def _s(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def _overlap(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max(0.0, _s(max(a0, b0), min(a1, b1)))


def _time_of_step(progress: tuple[Progress, ...], step: int) -> datetime:
    """When ``step`` was reached, interpolated between the progress rows around it (clamped to the rows)."""
    if step <= progress[0].step:
        return progress[0].ts
    for before, after in zip(progress, progress[1:]):
        if before.step <= step <= after.step:
            if after.step == before.step:
                return after.ts
            share = (step - before.step) / (after.step - before.step)
            return before.ts + (after.ts - before.ts) * share
    return progress[-1].ts


def completed_checkpoints(allocation: Allocation, end: datetime, by_design: bool) -> list[Checkpoint]:
    """The allocation's checkpoints that completed: training went on after the save, or the allocation ended by
    design after the save's end."""
    last = allocation.progress[-1].ts if allocation.progress else None
    done = []
    for checkpoint in allocation.checkpoints:
        finished = checkpoint.ts.timestamp() + max(checkpoint.seconds, 0.0)
        if (last is not None and last.timestamp() > finished) or (by_design and finished <= end.timestamp()):
            done.append(checkpoint)
    return done


def account(allocations: list[Allocation], now: datetime) -> CampaignAccount:
    """The campaign's GPU-hours by allocation and in all: productive and each badput part (module docstring)."""
    chain = sorted((a for a in allocations if a.start is not None), key=lambda a: (a.start, a.key))
    ends = [a.end or now for a in chain]
    ends = [max(end, a.start) for a, end in zip(chain, ends)]
    progress = [tuple(sorted(a.progress, key=lambda p: (p.ts, p.step))) for a in chain]
    completed = [completed_checkpoints(a, end, by_design=not a.failed and not a.running) if p else []
                 for a, end, p in zip(chain, ends, progress)]
    # where each allocation resumed from, and whether that was older than the newest checkpoint there was
    resumed: list[int | None] = []
    older: list[dict] = []
    done_before: list[int] = []
    for a, p, done in zip(chain, progress, completed):
        if not p:
            resumed.append(None)
        else:
            candidates = [step for step in done_before if step < p[0].step]
            if a.restore is not None and a.restore.step is not None:
                start_step = a.restore.step
            elif candidates:
                start_step = max(candidates)
            else:
                start_step = 0 if not done_before else None
            resumed.append(start_step)
            newest = max(done_before, default=None)
            if start_step is not None and newest is not None and start_step < newest:
                older.append({"job": a.key, "resumed_from": start_step, "newest_checkpoint": newest})
        done_before.extend(c.step for c in done if c.step is not None)
    # the iteration up to which each allocation's work was kept: the lowest resume point after it
    kept: list[float] = [math.inf] * len(chain)
    future = math.inf
    last_trained = max((i for i, p in enumerate(progress) if p), default=None)
    for i in range(len(chain) - 1, -1, -1):
        if not progress[i]:
            continue
        limit = future
        if i == last_trained and chain[i].failed:
            # a last allocation that ended badly keeps its work up to its last completed checkpoint, else none of it
            steps = [c.step for c in completed[i] if c.step is not None]
            limit = min(limit, max(steps) if steps else (resumed[i] if resumed[i] is not None else 0))
        kept[i] = limit
        if resumed[i] is not None:
            future = min(future, resumed[i])
    accounts: list[AllocationAccount] = []
    previous_end: datetime | None = None
    for i, a in enumerate(chain):
        accounts.append(_account_one(a, ends[i], progress[i], kept[i], resumed[i], completed[i], now, previous_end))
        previous_end = ends[i] if previous_end is None else max(previous_end, ends[i])
    parts = {part: sum(x.badput[part] for x in accounts) for part in PARTS}
    return CampaignAccount(
        allocations=accounts,
        allocated_gpu_hours=sum(x.allocated_gpu_hours for x in accounts),
        productive_gpu_hours=sum(x.productive_gpu_hours for x in accounts),
        badput=parts,
        queue_hours=sum(x.queue_hours_before or 0.0 for x in accounts),
        older_restarts=older,
    )


def _account_one(a: Allocation, end: datetime, progress: tuple[Progress, ...], kept_step: float, resumed: int | None,
                 completed: list[Checkpoint], now: datetime, previous_end: datetime | None) -> AllocationAccount:
    seconds = {part: 0.0 for part in PARTS}
    span = _s(a.start, end)
    productive = 0.0
    kept_last = None
    if not progress:
        if a.failed and a.on_bad_nodes:
            seconds["bad_nodes"] = span
        else:
            seconds["startup"] = span
    else:
        first, last = progress[0].ts, progress[-1].ts
        first, last = min(max(first, a.start), end), min(max(last, a.start), end)
        stalls = [(c.ts, c.ts + timedelta(seconds=max(c.seconds, 0.0))) for c in a.checkpoints if a.start <= c.ts < end]

        def stalled(t0: datetime, t1: datetime) -> float:
            if t1 <= t0:
                return 0.0
            return sum(_overlap(s0, min(s1, end), t0, t1) for s0, s1 in stalls)

        pre = _s(a.start, first)
        load = 0.0
        if a.restore is not None and a.restore.seconds and resumed is not None:
            load = min(max(a.restore.seconds, 0.0), pre)
        seconds["restore"] = load
        seconds["startup"] = pre - load
        if kept_step is math.inf or kept_step >= progress[-1].step:
            t_keep = last
            kept_last = progress[-1].step
        elif kept_step < progress[0].step:
            t_keep = first
            kept_last = None
        else:
            t_keep = min(max(_time_of_step(progress, int(kept_step)), first), last)
            kept_last = int(kept_step)
        seconds["checkpoint"] = stalled(first, end) + stalled(a.start, first)
        seconds["startup"] -= min(stalled(a.start, first), seconds["startup"])
        seconds["lost_work"] = max(0.0, _s(t_keep, last) - stalled(t_keep, last))
        tail = max(0.0, _s(last, end) - stalled(last, end))
        if a.failed:
            seconds["hang"] = tail
        elif a.running:
            if tail > HANG_AFTER_S:
                seconds["hang"] = tail
            else:
                productive += tail  # progress logged a moment ago: the run is training
        else:
            seconds["shutdown"] = tail
        training = max(0.0, _s(first, t_keep) - stalled(first, t_keep))
        dips = 0.0
        for dip in a.dips:
            if dip.kind not in DIP_KINDS:
                continue
            depth = min(max(dip.dip, 0.0), 1.0)
            dips += _overlap(dip.start, dip.end or t_keep, first, t_keep) * depth
        seconds["dips"] = min(dips, training)
        rest = training - seconds["dips"]
        idle_share = min(max(a.idle_share, 0.0), 1.0)
        bad_share = min(max(a.failed_node_share, 0.0), 1.0 - idle_share)
        seconds["idle"] = rest * idle_share
        seconds["bad_nodes"] = rest * bad_share
        productive += rest - seconds["idle"] - seconds["bad_nodes"]
    scale = a.gpus / 3600.0
    badput = {part: value * scale for part, value in seconds.items()}
    queue = None
    if previous_end is not None:
        queue = max(0.0, _s(previous_end, a.start)) / 3600.0
    steps = [c.step for c in completed if c.step is not None]
    return AllocationAccount(
        key=a.key, start=a.start, end=a.end, gpus=a.gpus, hours=span / 3600.0, allocated_gpu_hours=span * scale,
        productive_gpu_hours=productive * scale, badput=badput, queue_hours_before=queue,
        resumed_from=resumed if progress else None, first_step=progress[0].step if progress else None,
        last_step=progress[-1].step if progress else None, kept_step=kept_last,
        last_checkpoint=max(steps) if steps else None)


def median_or_none(values) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(median(values)) if values else None
