"""GPU-hours lost and headroom: the one rule the system page, the staff triage inbox, the usage reports and the
notifications share (issue 35).

**Lost** is only what can be measured as lost, GPU by GPU, over the steady state (the warm-up is not counted):

* an **idle GPU** (busy less than ``IDLE_BUSY`` of the steady state, the scoring's rule) loses all its hours;
* a **busy GPU** loses the share of its time it did nothing (``1 − busy``): stalls, checkpoints, data waits,
  near-idle GPUs;
* the **wait for stragglers**: while a GPU or node lags its peers by a share ``d`` (the straggler finding's
  deviation in saturation, SM clock or busy time), the job's other working GPUs wait ``d`` of that time for it
  (synchronous steps run at the slowest GPU's pace); overlapping stragglers count once, at the largest ``d``.
  A clock deficit slows only the part of a step bound by compute: an SM-clock finding counts ``d`` times the job's
  compute saturation when it is known (a GPU at 72 % clock in a job at 60 % of its compute ceiling makes its peers
  wait about 17 % of the time, as the job's own throughput shows, not 28 %);
* GPUs on **failed nodes** (vetting) lose all their hours.

**Whose loss**: the wait for a GPU whose clock the hardware holds down (an SM-clock straggler: power or thermal
throttling) and the GPUs on failed nodes are lost *to faulty hardware*: the job's owner cannot win them back, staff
can (drain the node). The rest is lost *by the job* (``Waste.own``): idle GPUs, stalls, and the wait for stragglers
slow for the job's own reasons. Every list of wasteful jobs (system page, reports, triage, mail) ranks and judges by
what the job loses itself; the part lost to hardware is shown beside it and counted against the node.

**Headroom** is the distance to a reference — the typical steady score of good jobs on the same GPU model — over
the busy time: ``hours × max(0, ref × busy − S) / 100`` per GPU. It is never counted as loss: no real training
reaches 100.

**Ranking**: a list of the jobs that lose most (system page, reports, triage) puts the jobs the verdict calls
wasteful (:func:`is_wasteful`: a quarter or more of their GPU-hours lost by the job, or a steady score under 30) first,
then the others, each part by the GPU-hours lost by the job: :func:`rank_key`. A big training job losing 11 % to its
checkpoints and evaluations loses more GPU-hours than a small job with three quarters of its GPUs idle, but it uses
its allocation as training does; the idle job is the one to act on. Both numbers are shown as measured.

**Warm-up**: until the job's steady state is known (the scoring saw the GPUs' median busy share pass 0.5, or the
job has run ``WARMUP_MAX_S`` without ever doing so: then its idle GPUs are idle, not warming up) there is no loss,
no verdict and no mail: :func:`warming_up`.

A GPU without a busy share loses nothing known: it is counted in ``unknown_gpus`` and never guessed.

The words shown beside these numbers everywhere are ``LOSS_WORDS`` / ``HEADROOM_WORDS`` / ``WARMING_UP_WORDS``.

Plain Python: no Django. Tested in tests/saturation/test_waste.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping

from apps.core.numbers import finite

IDLE_BUSY = 0.05  # apps.saturation.scoring: a GPU busy less than this share of the time is idle
# A running job is "wasteful" (triage, notifications) when at least this share of its GPU-hours is lost, or when
# its steady score is under this. Settings WASTE_SCORE_BELOW and WASTE_IDLE_SHARE override them.
WASTE_SCORE_BELOW = 30.0
WASTE_IDLE_SHARE = 0.25
# The longest warm-up: a job whose GPUs never got busy after this long is idle, not warming up
# (setting SATURATION_WARMUP_MAX_SECONDS).
WARMUP_MAX_S = 1800.0
STRAGGLER_SIGNALS = ("saturation", "sm_clock", "busy")  # the signals that slow a synchronous step
STRAGGLER_LEVELS = ("gpu", "node")  # switch and group findings sum the node findings: not counted twice
HARDWARE_SIGNALS = ("sm_clock",)  # a clock the hardware holds down: the wait for it is lost to hardware, not the job
MAX_DRAG = 0.9

# The words shown where the numbers are (system page, reports, triage, mail, API help): one place.
LOSS_WORDS = ("GPU-hours lost count only what was measurably lost in the steady state: idle GPUs whole, the time busy "
              "GPUs did nothing (stalls, checkpoints, data waits), the time the other GPUs waited for a straggler, and "
              "GPUs on failed nodes; the warm-up is not counted. Jobs are ranked by what they lose themselves: the wait for a "
              "GPU whose clock the hardware holds down and GPUs on failed nodes are lost to faulty hardware, shown apart "
              "and counted against the node.")
HEADROOM_WORDS = ("Headroom is the distance to the typical steady score of good jobs on the same GPU model, in GPU-hours "
                  "of busy time; it is what tuning could gain, not a loss: no real training reaches 100.")
WARMING_UP_WORDS = ("warming up: the GPUs have not reached their steady state yet, so there is no verdict on waste")
LOSS_HELP_URL = "/system/#what-lost-means"


@dataclass(frozen=True)
class Waste:
    gpu_hours: float  # the allocation over the hours given: GPUs × hours
    lost: float  # GPU-hours measurably lost: idle + stalled + straggler wait + failed nodes
    idle_gpu_hours: float  # the part of ``lost`` from idle GPUs
    unknown_gpus: int  # GPUs without a busy share: not counted in ``lost``
    stalled_gpu_hours: float = 0.0  # busy GPUs' time without work (1 − busy)
    straggler_gpu_hours: float = 0.0  # the other GPUs' wait for stragglers
    failed_node_gpu_hours: float = 0.0  # GPUs on failed nodes
    headroom: float | None = None  # GPU-hours to the reference; None without a reference or a score
    warming_up: bool = False  # no verdict yet: every loss is 0
    hardware_gpu_hours: float = 0.0  # the part of ``lost`` lost to faulty hardware: clock-straggler wait + failed nodes
    hardware_hosts: tuple = ()  # the nodes that part is charged to, with their GPU-hours: ((host, gpu_hours), ...)

    @property
    def own(self) -> float:
        """GPU-hours the job loses itself: ``lost`` less what faulty hardware cost it."""
        return max(0.0, self.lost - self.hardware_gpu_hours)

    @property
    def own_share(self) -> float | None:
        """``own`` over the known allocation (None when nothing is known)."""
        return self.own / self.gpu_hours if self.gpu_hours and not self.unknown_gpus else None

    @property
    def share(self) -> float | None:
        """Lost over the known allocation (None when nothing is known)."""
        return self.lost / self.gpu_hours if self.gpu_hours and not self.unknown_gpus else None

    def parts_words(self) -> str:
        """Where the job's own loss comes from, largest first, in GPU-hours: "345.0 stalled (busy GPUs without work),
        48.0 on idle GPUs", so that a job ranked high says why. What faulty hardware cost it (``hardware_gpu_hours``)
        is not among them: callers say it apart."""
        clock = max(0.0, self.hardware_gpu_hours - self.failed_node_gpu_hours)
        parts = [(self.straggler_gpu_hours - clock, "waiting for stragglers"), (self.idle_gpu_hours, "on idle GPUs"),
                 (self.stalled_gpu_hours, "stalled (busy GPUs without work)")]
        return ", ".join(f"{hours:,.1f} {words}" for hours, words in sorted(parts, key=lambda part: -part[0])
                         if hours >= 0.05)


def _parse(value) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def straggler_drag(stragglers: Iterable[Mapping] | None, steady_s: float | None, compute: float | None = None,
                   signals: Iterable[str] = STRAGGLER_SIGNALS) -> float:
    """Share (0–``MAX_DRAG``) of the steady state the job's other GPUs waited for its stragglers: the union over
    time of the GPU and node findings on a speed signal, each weighing its deviation, the largest where they
    overlap; an SM-clock deviation weighs times ``compute`` (the job's compute saturation, 0–100) when known.
    ``signals``: only the findings on these signals (``HARDWARE_SIGNALS``: the part lost to hardware).
    Without a steady span (``steady_s``) nothing is known: 0."""
    signals = tuple(signals)
    if not steady_s or steady_s <= 0:
        return 0.0
    bound = finite(compute)
    bound = min(max(bound / 100.0, 0.0), 1.0) if bound is not None else 1.0
    spans, loose = [], 0.0
    for item in stragglers or []:
        if not isinstance(item, Mapping) or item.get("level") not in STRAGGLER_LEVELS \
                or item.get("signal") not in STRAGGLER_SIGNALS or item.get("signal") not in signals:
            continue
        d = finite(item.get("deviation"))
        duration = finite(item.get("duration_s")) or 0.0
        if d is None or duration <= 0:
            continue
        d = min(abs(d) * (bound if item.get("signal") == "sm_clock" else 1.0), MAX_DRAG)
        start, end = _parse(item.get("start")), _parse(item.get("end"))
        if start is not None and end is not None and end > start:
            spans.append((start, end, d))
        else:
            loose = max(loose, d * duration)  # without times: the largest alone
    waited = 0.0
    if spans:
        edges = sorted({t for s, e, _ in spans for t in (s, e)})
        for low, high in zip(edges, edges[1:]):
            d = max((d for s, e, d in spans if s <= low and e >= high), default=0.0)
            waited += d * (high - low).total_seconds()
    return min(max(waited, loose) / steady_s, MAX_DRAG)


def gpu_hours_lost(hours: float, gpus: int, *, score: float | None = None, idle_gpus: int = 0,
                   per_gpu: Iterable[Mapping] | None = None, stragglers: Iterable[Mapping] | None = None,
                   steady_s: float | None = None, failed_hosts: Iterable[str] = (), reference: float | None = None,
                   warming_up: bool = False, compute: float | None = None) -> Waste:
    """What ``gpus`` GPUs held for ``hours`` hours lost, and their headroom to ``reference`` (0–100).

    ``per_gpu`` (the saturation record's rows: ``busy`` 0–1, ``score`` 0–100, ``host``) decides GPU by GPU when
    given; without rows only the ``idle_gpus`` are known to lose (the others are ``unknown_gpus``).
    ``stragglers`` (the record's findings) over ``steady_s`` seconds of steady state give the wait for them, with
    ``compute`` (the job's compute saturation, 0–100) weighing clock deficits.
    ``failed_hosts``: nodes whose vetting failed. ``warming_up``: no loss yet (see :func:`warming_up`).
    """
    hours = max(0.0, float(hours or 0.0))
    gpus = max(0, int(gpus or 0))
    if warming_up:
        return Waste(gpu_hours=gpus * hours, lost=0.0, idle_gpu_hours=0.0, unknown_gpus=0, warming_up=True)
    rows = [row for row in (per_gpu or []) if isinstance(row, Mapping)][:gpus] if gpus else []
    failed = {str(host) for host in failed_hosts or ()}
    ref = finite(reference)
    ref = min(max(ref, 0.0), 100.0) if ref is not None else None
    idle = stalled = on_failed = 0.0
    headroom = 0.0 if ref is not None else None
    unknown = 0
    working = 0  # GPUs that do the job's steps (not idle, not on a failed node): they wait for stragglers
    if rows:
        for row in rows:
            busy, s = finite(row.get("busy")), finite(row.get("score"))
            if row.get("host") is not None and str(row.get("host")) in failed:
                on_failed += hours
            elif busy is None:
                unknown += 1
            elif busy < IDLE_BUSY:
                idle += hours
            else:
                busy = min(busy, 1.0)
                stalled += hours * (1.0 - busy)
                working += 1
                if headroom is not None and s is not None:
                    headroom += hours * max(0.0, ref * busy - min(max(s, 0.0), 100.0)) / 100.0
        unknown += max(0, gpus - len(rows))  # GPUs the job holds that never reported
        if headroom is not None and not working:
            headroom = None
    else:
        idle_gpus = min(max(0, int(idle_gpus or 0)), gpus)
        idle = idle_gpus * hours
        unknown = gpus - idle_gpus
        working = unknown
        headroom = None
    waiters = hours * max(0, working - _lagging(stragglers, rows))
    waiting = straggler_drag(stragglers, steady_s, compute) * waiters
    # the union over time takes the largest deviation where findings overlap: the clock findings alone wait no longer
    clock_wait = min(straggler_drag(stragglers, steady_s, compute, signals=HARDWARE_SIGNALS) * waiters, waiting)
    lost = idle + stalled + waiting + on_failed
    charged: dict[str, float] = {}
    clock_hosts = _hosts_of(stragglers, HARDWARE_SIGNALS)
    for host in clock_hosts:
        charged[host] = charged.get(host, 0.0) + clock_wait / len(clock_hosts)
    if on_failed:
        for row in rows:
            host = row.get("host")
            if host is not None and str(host) in failed:
                charged[str(host)] = charged.get(str(host), 0.0) + hours
    return Waste(gpu_hours=gpus * hours, lost=lost, idle_gpu_hours=idle, unknown_gpus=unknown, stalled_gpu_hours=stalled,
                 straggler_gpu_hours=waiting, failed_node_gpu_hours=on_failed, headroom=headroom,
                 hardware_gpu_hours=clock_wait + on_failed,
                 hardware_hosts=tuple(sorted(charged.items(), key=lambda item: (-item[1], item[0]))))


def _hosts_of(stragglers: Iterable[Mapping] | None, signals: Iterable[str]) -> list[str]:
    """The hosts of the GPU and node findings on ``signals``, sorted."""
    signals = tuple(signals)
    return sorted({str(item["host"]) for item in stragglers or [] if isinstance(item, Mapping)
                   and item.get("level") in STRAGGLER_LEVELS and item.get("signal") in signals and item.get("host")})


def _lagging(stragglers: Iterable[Mapping] | None, rows: list[Mapping]) -> int:
    """How many GPUs the speed findings name (a GPU finding: one; a node finding: the node's GPUs)."""
    gpus: set = set()
    for item in stragglers or []:
        if not isinstance(item, Mapping) or item.get("level") not in STRAGGLER_LEVELS \
                or item.get("signal") not in STRAGGLER_SIGNALS:
            continue
        if item.get("level") == "gpu":
            gpus.add((item.get("host"), item.get("gpu")))
        else:
            on_host = [(row.get("host"), row.get("gpu")) for row in rows if row.get("host") == item.get("host")]
            gpus.update(on_host or [(item.get("host"), None)])
    return len(gpus)


def warming_up(*, steady_found: bool | None, observed_s: float | None, max_warmup_s: float = WARMUP_MAX_S,
               ended: bool = False) -> bool:
    """Whether a job is still in its warm-up: its scoring has not seen the steady state start (``steady_found``
    False: the GPUs' median busy share never passed 0.5) and it has run (``observed_s``, from its start to the
    last scored sample) less than ``max_warmup_s``. ``steady_found`` None (a record scored before this was kept)
    is not warm-up, nor is a job that has ended (``ended``): its data is all there will be, and GPUs that never got
    busy were idle."""
    if steady_found is None or steady_found or ended:
        return False
    return (finite(observed_s) or 0.0) < max_warmup_s


def rank_key(waste: Waste, *, score: float | None, gpus: int, idle_gpus: int = 0,
             score_below: float = WASTE_SCORE_BELOW, idle_share: float = WASTE_IDLE_SHARE) -> tuple:
    """The order of a list of losing jobs (smallest first): the wasteful ones (the verdict on what the job loses
    itself) before the others, each part by the GPU-hours the job loses itself, largest first."""
    wasteful = is_wasteful(score=score, gpus=gpus, idle_gpus=idle_gpus, lost_share=waste.own_share,
                           warming_up=waste.warming_up, score_below=score_below, idle_share=idle_share)
    return (0 if wasteful else 1, -round(waste.own, 6))


REFERENCE_MIN_JOBS = 3
REFERENCE_QUANTILE = 0.9


def reference_score(scores: Iterable[float | None]) -> float | None:
    """The reference for headroom on one GPU model: the 90th percentile of its jobs' steady scores (a typical good
    job there), from at least ``REFERENCE_MIN_JOBS`` scored jobs; None with fewer."""
    known = sorted(v for v in (finite(s) for s in scores) if v is not None)
    if len(known) < REFERENCE_MIN_JOBS:
        return None
    position = (len(known) - 1) * REFERENCE_QUANTILE
    low = int(position)
    high = min(low + 1, len(known) - 1)
    return known[low] + (known[high] - known[low]) * (position - low)


def steady_seconds(steady_start: datetime | None, scored_until: datetime | None) -> float | None:
    """Seconds of steady state the record's findings cover (None when either end is unknown)."""
    if steady_start is None or scored_until is None:
        return None
    return max(0.0, (scored_until - steady_start).total_seconds()) or None


def is_wasteful(*, score: float | None, gpus: int, idle_gpus: int = 0, lost_share: float | None = None,
                warming_up: bool = False, score_below: float = WASTE_SCORE_BELOW,
                idle_share: float = WASTE_IDLE_SHARE) -> bool:
    """Whether a running job wastes its GPUs: at least ``idle_share`` of its GPU-hours lost (``lost_share``, the
    rule above; without it, the share of its GPUs idle), or its steady score under ``score_below``. A job without
    GPUs has nothing to waste; a job warming up gets no verdict."""
    if not gpus or warming_up:
        return False
    share = finite(lost_share)
    if share is None and idle_gpus:
        share = idle_gpus / gpus
    if share is not None and share >= idle_share:
        return True
    s = finite(score)
    return s is not None and s < score_below
