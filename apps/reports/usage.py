"""Usage and efficiency of GPU allocations in a report window, per project (Slurm account), user or partition.

A job counts only the part of its run inside the window ``[since, until)``: ``gpus × hours`` of the overlap of
``[start, end)`` with the window, where a running job (``end`` None) runs until ``min(now, until)``. A job that
has not started (``start`` None) or holds no GPUs counts 0 GPU-hours. A job's GPU count says where it comes from
(``gpus_source``: Slurm, its TRES, the topology or telemetry, :mod:`apps.jobs.gpucount`); ``gpu_counts`` sums the
jobs counted from elsewhere than Slurm and lists those no source gives a count (never a silent 0).

Per group (and for all jobs together):

- ``gpu_hours``: the sum of the jobs' GPU-hours inside the window;
- ``mean_saturation``: the GPU-hour-weighted mean score (0–100) of the *scored* jobs, with ``scored_share`` the
  share of the GPU-hours that carry a score (None when none does: never guessed);
- ``idle_gpu_hours``, ``gpu_hours_lost`` and ``headroom_gpu_hours``: :func:`apps.saturation.waste.gpu_hours_lost` on
  the overlap hours (only what is measurably lost: idle GPUs, stalls, the wait for stragglers; a job warming up loses
  nothing; the distance to its GPU model's reference is headroom, never loss), with ``lost_known_share`` the share of
  GPU-hours whose loss is known (GPUs without a busy share lose nothing known);
- ``energy_kwh``: each job's ``energy_j``, measured over ``[energy_start, energy_end)`` (the scored span; the whole
  run when not given), scaled by the share of that span inside the window; time outside the measured span and
  jobs without a reading add nothing (never extrapolated), and ``energy_share`` says which share of the GPU-hours
  the energy covers;
- ``jobs``: the jobs whose run overlaps the window (with or without GPUs).

Plus the most wasteful jobs (by GPU-hours lost in the window) and a histogram of job scores in 10-point bins.

Plain Python: no Django. Tested in tests/reports/test_usage.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping

from apps.core.numbers import finite
from apps.saturation.waste import WASTE_IDLE_SHARE, WASTE_SCORE_BELOW, gpu_hours_lost, rank_key

GROUPS = {"project": "account", "user": "user", "partition": "partition"}
BIN_WIDTH = 10
BIN_EDGES = list(range(0, 101, BIN_WIDTH))  # 0, 10, ..., 100: the last bin holds 90–100 inclusive
TOP_JOBS = 10
COLUMNS = ("group_by", "key", "jobs", "gpu_hours", "mean_saturation", "scored_share", "idle_gpu_hours",
           "gpu_hours_lost", "headroom_gpu_hours", "lost_known_share", "energy_kwh", "energy_share")


@dataclass(frozen=True)
class JobRow:
    cluster: str
    job_id: int
    user: str
    account: str
    partition: str
    gpus: int | None
    start: datetime | None
    end: datetime | None  # None while the job runs
    score: float | None = None  # 0–100
    idle_gpus: int = 0
    per_gpu: list | None = None
    energy_j: float | None = None  # energy over [energy_start, energy_end) (the whole run when those are None)
    name: str = ""
    energy_start: datetime | None = None
    energy_end: datetime | None = None
    gpus_source: str = "slurm"  # where ``gpus`` comes from (apps.jobs.gpucount.SOURCES); "unknown" with gpus None
    stragglers: list | None = None  # the saturation record's straggler findings
    steady_s: float | None = None  # seconds of steady state they cover
    warming_up: bool = False  # not in its steady state yet: no loss (apps.saturation.waste.warming_up)
    reference: float | None = None  # the headroom reference of its GPU model (0-100)
    compute: float | None = None  # its compute saturation (0-100): weighs a clock deficit's drag

    @classmethod
    def of(cls, row: "JobRow | Mapping") -> "JobRow":
        if isinstance(row, JobRow):
            return row
        return cls(**{key: row.get(key) for key in cls.__dataclass_fields__ if key in row})


@dataclass(frozen=True)
class JobUsage:
    """One job's part of the window."""
    row: JobRow
    hours: float  # of the run inside the window
    gpu_hours: float
    lost: float
    idle_gpu_hours: float
    known_gpu_hours: float  # GPU-hours whose loss is known
    energy_kwh: float | None
    energy_gpu_hours: float = 0.0  # GPU-hours inside the window whose energy was measured
    headroom: float | None = None  # GPU-hours of headroom to the reference (None: no reference)
    own: float = 0.0  # the part of ``lost`` the job lost itself (apps.saturation.waste.Waste.own)
    hardware: float = 0.0  # the part lost to faulty hardware
    rank: tuple = (1, 0.0)  # apps.saturation.waste.rank_key: the wasteful first, then by ``own``


def _hours(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds() / 3600.0)


def job_usage(row: JobRow | Mapping, since: datetime, until: datetime, now: datetime, *,
              score_below: float = WASTE_SCORE_BELOW, idle_share: float = WASTE_IDLE_SHARE) -> JobUsage | None:
    """``row``'s part of ``[since, until)``, or None when its run does not overlap the window."""
    row = JobRow.of(row)
    if row.start is None:
        return None
    end = row.end if row.end is not None else now
    start_in, end_in = max(row.start, since), min(end, until)
    hours = _hours(start_in, end_in)
    if hours <= 0:
        return None
    gpus = max(0, int(row.gpus or 0))
    waste = gpu_hours_lost(hours, gpus, score=row.score, idle_gpus=row.idle_gpus or 0, per_gpu=row.per_gpu,
                           stragglers=row.stragglers, steady_s=row.steady_s, reference=row.reference,
                           warming_up=row.warming_up, compute=row.compute)
    energy, energy_kwh, energy_gpu_hours = finite(row.energy_j), None, 0.0
    measured_start = max(row.energy_start or row.start, row.start)
    measured_end = min(row.energy_end or end, end)
    measured_hours = _hours(measured_start, measured_end)
    if energy is not None and measured_hours > 0:
        inside = _hours(max(measured_start, since), min(measured_end, until))
        if inside > 0:  # a reading of another part of the run says nothing about this one
            energy_kwh = energy * (inside / measured_hours) / 3.6e6
            energy_gpu_hours = gpus * inside
    return JobUsage(row=row, hours=hours, gpu_hours=gpus * hours, lost=waste.lost, idle_gpu_hours=waste.idle_gpu_hours,
                    known_gpu_hours=(gpus - waste.unknown_gpus) * hours, energy_kwh=energy_kwh,
                    energy_gpu_hours=energy_gpu_hours, headroom=waste.headroom, own=waste.own,
                    hardware=waste.hardware_gpu_hours,
                    rank=rank_key(waste, score=row.score, gpus=gpus, idle_gpus=row.idle_gpus or 0, score_below=score_below,
                                  idle_share=idle_share))


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _aggregate(usages: list[JobUsage]) -> dict:
    gpu_hours = sum(u.gpu_hours for u in usages)
    scored = [u for u in usages if finite(u.row.score) is not None and u.gpu_hours > 0]
    scored_hours = sum(u.gpu_hours for u in scored)
    with_energy = [u for u in usages if u.energy_kwh is not None]
    return {
        "jobs": len(usages),
        "gpu_hours": gpu_hours,
        "mean_saturation": (sum(float(u.row.score) * u.gpu_hours for u in scored) / scored_hours) if scored_hours else None,
        "scored_share": _share(scored_hours, gpu_hours),
        "idle_gpu_hours": sum(u.idle_gpu_hours for u in usages),
        "gpu_hours_lost": sum(u.lost for u in usages),
        "headroom_gpu_hours": sum(u.headroom or 0.0 for u in usages),
        "lost_known_share": _share(sum(u.known_gpu_hours for u in usages), gpu_hours),
        "energy_kwh": sum(u.energy_kwh for u in with_energy) if with_energy else None,
        "energy_share": _share(sum(u.energy_gpu_hours for u in with_energy), gpu_hours),
    }


def gpu_count_sources(usages: Iterable[JobUsage]) -> dict:
    """The jobs whose GPU count Slurm did not give: how many per other source, their GPU-hours, and the jobs that
    no source gives a count (they count no GPU-hours: listed by name, never a silent 0)."""
    inferred: dict[str, dict] = {}
    unknown = []
    for usage in usages:
        source = usage.row.gpus_source or "slurm"
        if source == "slurm":
            continue
        if source == "unknown":
            unknown.append(f"{usage.row.cluster}/{usage.row.job_id}")
            continue
        entry = inferred.setdefault(source, {"jobs": 0, "gpu_hours": 0.0})
        entry["jobs"] += 1
        entry["gpu_hours"] += usage.gpu_hours
    return {"inferred": inferred, "unknown_jobs": len(unknown), "unknown": unknown[:TOP_JOBS]}


def score_histogram(usages: Iterable[JobUsage]) -> dict:
    """Scored jobs per 10-point bin of their score (and their GPU-hours in the window); 100 falls in the last bin."""
    bins = len(BIN_EDGES) - 1
    jobs, hours = [0] * bins, [0.0] * bins
    for usage in usages:
        score = finite(usage.row.score)
        if score is None:
            continue
        index = min(max(int(score // BIN_WIDTH), 0), bins - 1)
        jobs[index] += 1
        hours[index] += usage.gpu_hours
    return {"edges": list(BIN_EDGES), "jobs": jobs, "gpu_hours": hours}


def usage_report(rows: Iterable[JobRow | Mapping], *, since: datetime, until: datetime, now: datetime,
                 group_by: str = "project", top: int = TOP_JOBS, score_below: float = WASTE_SCORE_BELOW,
                 idle_share: float = WASTE_IDLE_SHARE) -> dict:
    """The report of ``rows`` over ``[since, until)`` grouped by ``group_by`` (project, user or partition).

    Returns ``{"totals", "rows", "top_jobs", "histogram", "biggest"}``: ``rows`` one per group (``key`` the
    account, user or partition), largest GPU-hours first; ``biggest`` the group that lost the most GPU-hours.
    """
    if group_by not in GROUPS:
        raise ValueError(f"group_by is one of {', '.join(GROUPS)}, not {group_by!r}")
    if since >= until:
        raise ValueError("the window's start must come before its end")
    usages = [u for u in (job_usage(row, since, until, now, score_below=score_below, idle_share=idle_share)
                          for row in rows) if u is not None]
    attribute = GROUPS[group_by]
    groups: dict[str, list[JobUsage]] = {}
    for usage in usages:
        groups.setdefault(getattr(usage.row, attribute) or "", []).append(usage)
    table = [{"group_by": group_by, "key": key, **_aggregate(members)} for key, members in groups.items()]
    table.sort(key=lambda r: (-r["gpu_hours"], r["key"]))
    losers = [r for r in table if r["gpu_hours_lost"] > 0]
    biggest = max(losers, key=lambda r: (r["gpu_hours_lost"], r["key"])) if losers else None
    wasteful = sorted((u for u in usages if u.lost > 0), key=lambda u: (*u.rank, u.row.cluster, u.row.job_id))[:top]
    return {
        "totals": _aggregate(usages),
        "rows": table,
        "biggest": {"key": biggest["key"], "gpu_hours_lost": biggest["gpu_hours_lost"],
                    "share": _share(biggest["gpu_hours_lost"], sum(r["gpu_hours_lost"] for r in table))} if biggest else None,
        "top_jobs": [{"cluster": u.row.cluster, "job_id": u.row.job_id, "name": u.row.name, "user": u.row.user,
                      "account": u.row.account, "partition": u.row.partition, "gpus": u.row.gpus,
                      "gpus_source": u.row.gpus_source, "score": u.row.score,
                      "idle_gpus": u.row.idle_gpus, "gpu_hours": u.gpu_hours, "gpu_hours_lost": u.lost,
                      "gpu_hours_lost_by_job": u.own, "gpu_hours_lost_to_hardware": u.hardware, "wasteful": u.rank[0] == 0,
                      "headroom_gpu_hours": u.headroom, "running": u.row.end is None} for u in wasteful],
        "histogram": score_histogram(usages),
        "gpu_counts": gpu_count_sources(usages),
    }
