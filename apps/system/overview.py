"""The whole machine at a glance: load per dragonfly group and switch, system totals and the system's
saturation histogram, from rows of jobs and a map of the nodes.

Plain Python: no Django. The selectors (``apps/system/selectors.py``) read the jobs, their saturation
records, the topology and the vetting states and hand them here as plain data; tests in
``tests/system/test_overview.py`` compute the answers by hand.

Inputs
------
A **job row** (:class:`JobRow`) is one running (or, for the histogram, recently run) job: who may see it,
its GPUs and nodes, its saturation score ``S`` (0-100, ``None`` when not scored), compute and memory
saturation (0-100), limiter, idle GPUs (``idle_gpu_list``: ``(host, gpu index)`` of GPUs busy under 5 %),
the per-GPU rows of its saturation record (``per_gpu``: ``score`` 0-100, ``busy`` 0-1, ``host``, ``gpu``),
its straggler findings and how many hours it ran (overall, and in each histogram window).

The **node map** is ``hostname -> NodeInfo(group, switches, vetting)``: ``switches`` lists the switch of
each NIC in NIC order (``"3.12"`` = group 3, switch 12); a node's GPUs are spread evenly over its NICs'
switches (GH200 nodes: GPU i sends through NIC i).

What the numbers mean
---------------------
* A job's ``S`` is the **steady-state mean** over its GPUs from its saturation record, not a value at
  this moment; the load per group and switch is that mean, GPU-weighted over the GPUs the jobs hold there.
* The histogram spreads each job's steady-state score (per GPU where the record has per-GPU scores) over
  the job's whole overlap with the window: it says how many GPU-hours were spent at which saturation, not
  when. GPUs without a score go to the ``unscored`` bin, never guessed.
* ``network`` is ``None`` here: the network load comes from the switches' port counters (``network.py``), which
  the page and the API join to the groups.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from apps.core.numbers import finite
from apps.saturation.waste import IDLE_BUSY, WASTE_IDLE_SHARE, WASTE_SCORE_BELOW, gpu_hours_lost, rank_key

# Vetting states whose node counts as failed: its GPUs' hours are lost (apps/saturation/waste.py)
FAILED_NODE_STATES = ("drain_recommended", "drained", "in_repair")

BIN_WIDTH = 10  # saturation points per histogram bin
BIN_LABELS = [f"{low}-{low + BIN_WIDTH}" for low in range(0, 100, BIN_WIDTH)]
UNSCORED = "unscored"
HIDDEN_LABEL = "another project's job"


@dataclass(frozen=True)
class NodeInfo:
    group: int | None
    switches: tuple[str, ...] = ()
    vetting: str = "healthy"


@dataclass
class JobRow:
    key: str  # stable within one answer (e.g. the job's primary key); never shown for a hidden job
    cluster: str
    job_id: str
    name: str
    user: str
    account: str
    gpus: int
    nodes: list[str]
    visible: bool = True
    score: float | None = None
    compute: float | None = None
    memory: float | None = None
    limiter: str = ""
    idle_gpus: int = 0
    idle_gpu_list: list[tuple[str, int]] = field(default_factory=list)
    per_gpu: list[Mapping] = field(default_factory=list)
    stragglers: int = 0  # straggler findings
    straggler_hosts: list[str] = field(default_factory=list)
    hours: float = 0.0  # hours run so far
    url: str = ""
    running: bool = True
    window_hours: dict[str, float] = field(default_factory=dict)  # histogram window name -> hours of overlap
    straggler_findings: list[Mapping] = field(default_factory=list)  # the record's findings (the wait for them is lost)
    steady_s: float | None = None  # seconds of steady state the record covers
    warming_up: bool = False  # no steady state yet: no loss, no verdict (waste.warming_up)
    reference: float | None = None  # the headroom reference of its GPU model (waste.reference_score)


def overlap_hours(start, end, window_start, window_end) -> float:
    """Hours of ``[start, end]`` inside ``[window_start, window_end]`` (datetimes; 0 when apart)."""
    if start is None or end is None:
        return 0.0
    low, high = max(start, window_start), min(end, window_end)
    return max(0.0, (high - low).total_seconds() / 3600.0)


def gpus_per_node(job: JobRow) -> float:
    return job.gpus / len(job.nodes) if job.nodes else 0.0


def _new_load() -> dict:
    return {"jobs": set(), "nodes": set(), "gpus": 0.0, "scored_gpus": 0.0, "weighted_s": 0.0, "idle_gpus": 0}


def _finish(key: str, load: dict, **extra) -> dict:
    scored = load["scored_gpus"]
    return {**extra, "jobs": len(load["jobs"]), "nodes": len(load["nodes"]), "gpus": _round(load["gpus"]),
            "scored_gpus": _round(scored), "mean_s": round(load["weighted_s"] / scored, 1) if scored else None,
            "idle_gpus": load["idle_gpus"], "network": None}


def _round(value: float):
    return int(value) if float(value).is_integer() else round(value, 2)


def location_load(jobs: Iterable[JobRow], nodes: Mapping[str, NodeInfo]) -> tuple[list[dict], list[dict]]:
    """Load per dragonfly group and per switch of the running ``jobs``: jobs there, allocated nodes there,
    GPUs held there, the GPU-weighted mean S of those GPUs (scored jobs only), idle GPUs there.

    A node's GPUs count in its group; on switches they are spread evenly over the node's NICs (a node with
    4 GPUs and 4 NICs puts one GPU on each NIC's switch). An idle GPU counts on its node's group and on the
    switch of its NIC (``gpu index`` -> NIC of the same index; the first NIC when the node has fewer NICs).
    """
    groups: dict[int, dict] = {}
    switches: dict[str, dict] = {}
    for job in jobs:
        per_node = gpus_per_node(job)
        s = finite(job.score)
        for host in job.nodes:
            info = nodes.get(host)
            if info is None or info.group is None:
                continue
            load = groups.setdefault(info.group, _new_load())
            load["jobs"].add(job.key)
            load["nodes"].add(host)
            load["gpus"] += per_node
            if s is not None:
                load["scored_gpus"] += per_node
                load["weighted_s"] += per_node * s
            if info.switches:
                share = per_node / len(info.switches)
                for name in info.switches:
                    load = switches.setdefault(name, _new_load())
                    load["jobs"].add(job.key)
                    load["nodes"].add(host)
                    load["gpus"] += share
                    if s is not None:
                        load["scored_gpus"] += share
                        load["weighted_s"] += share * s
        for host, gpu in job.idle_gpu_list:
            info = nodes.get(host)
            if info is None or info.group is None:
                continue
            groups.setdefault(info.group, _new_load())["idle_gpus"] += 1
            if info.switches:
                name = info.switches[gpu] if 0 <= gpu < len(info.switches) else info.switches[0]
                switches.setdefault(name, _new_load())["idle_gpus"] += 1
    group_rows = [_finish(str(g), groups[g], group=g) for g in sorted(groups)]
    switch_rows = [_finish(name, switches[name], switch=name,
                           group=int(name.split(".")[0]) if name.split(".")[0].isdigit() else None)
                   for name in sorted(switches, key=_switch_order)]
    return group_rows, switch_rows


def _switch_order(name: str):
    parts = name.split(".")
    return tuple(int(p) if p.isdigit() else 10**9 for p in parts), name


def failed_hosts(job: JobRow, nodes: Mapping[str, NodeInfo] | None) -> list[str]:
    """The job's nodes whose vetting state counts as failed (``FAILED_NODE_STATES``)."""
    return [host for host in job.nodes if nodes and host in nodes and nodes[host].vetting in FAILED_NODE_STATES]


def job_lost_per_hour(job: JobRow, nodes: Mapping[str, NodeInfo] | None = None):
    """GPU-hours this job loses per hour of running, and its headroom (apps.saturation.waste's rule)."""
    return gpu_hours_lost(1.0, job.gpus, score=job.score, idle_gpus=job.idle_gpus, per_gpu=job.per_gpu,
                          stragglers=job.straggler_findings, steady_s=job.steady_s, failed_hosts=failed_hosts(job, nodes),
                          reference=job.reference, warming_up=job.warming_up, compute=job.compute)


def totals(jobs: Iterable[JobRow], nodes: Mapping[str, NodeInfo] | None = None) -> dict:
    """System totals over the running ``jobs``."""
    jobs = list(jobs)
    scored = [job for job in jobs if finite(job.score) is not None]
    scored_gpus = sum(job.gpus for job in scored)
    lost = unknown = headroom = 0.0
    for job in jobs:
        waste = job_lost_per_hour(job, nodes)
        lost += waste.lost
        unknown += waste.unknown_gpus
        headroom += waste.headroom or 0.0
    return {
        "running_jobs": len(jobs),
        "scored_jobs": len(scored),
        "unscored_jobs": len(jobs) - len(scored),
        "allocated_gpus": sum(job.gpus for job in jobs),
        "allocated_nodes": len({host for job in jobs for host in job.nodes}),
        "idle_gpus": sum(min(job.idle_gpus, job.gpus) for job in jobs),
        "scored_gpus": scored_gpus,
        "mean_s": round(sum(job.gpus * float(job.score) for job in scored) / scored_gpus, 1) if scored_gpus else None,
        "gpu_hours_lost_per_hour": round(lost, 2),
        "headroom_gpu_hours_per_hour": round(headroom, 2),
        "gpus_of_unknown_loss": int(unknown),
        "warming_up_jobs": sum(1 for job in jobs if job.warming_up),
    }


def _bin(score: float) -> str:
    index = min(int(max(score, 0.0) // BIN_WIDTH), len(BIN_LABELS) - 1)  # 100 goes in the top bin
    return BIN_LABELS[index]


def histogram(jobs: Iterable[JobRow], window: str) -> dict:
    """GPU-hours at each saturation level over the window named ``window`` (``job.window_hours[window]``
    hours of each job fall inside it): 10-point bins and an ``unscored`` bin.

    GPU by GPU where the record has per-GPU scores (an idle GPU lands near 0); otherwise all the job's GPUs
    at its score; a job without a score, and GPUs of a record without a per-GPU score, are ``unscored``.
    """
    bins = {label: 0.0 for label in BIN_LABELS}
    bins[UNSCORED] = 0.0
    jobs_counted = 0
    for job in jobs:
        hours = max(0.0, float(job.window_hours.get(window, 0.0)))
        if not hours or not job.gpus:
            continue
        jobs_counted += 1
        rows = [row for row in job.per_gpu if isinstance(row, Mapping)]
        s = finite(job.score)
        if rows:
            for row in rows[: job.gpus]:
                gpu_s = finite(row.get("score"))
                bins[UNSCORED if gpu_s is None else _bin(gpu_s)] += hours
            bins[UNSCORED] += max(0, job.gpus - len(rows)) * hours
        elif s is not None:
            bins[_bin(s)] += job.gpus * hours
        else:
            bins[UNSCORED] += job.gpus * hours
    total = sum(bins.values())
    return {"window": window, "jobs": jobs_counted, "gpu_hours": round(total, 2),
            "bins": [{"bin": label, "gpu_hours": round(value, 2)} for label, value in bins.items()]}


def idle_gpus_of(per_gpu: Iterable[Mapping]) -> list[tuple[str, int]]:
    """``(host, gpu)`` of the GPUs a saturation record counts as idle (busy under ``IDLE_BUSY``)."""
    found = []
    for row in per_gpu or []:
        busy = finite(row.get("busy")) if isinstance(row, Mapping) else None
        if busy is not None and busy < IDLE_BUSY and row.get("host"):
            found.append((str(row["host"]), int(row.get("gpu") or 0)))
    return found


def straggler_hosts_of(per_gpu: Iterable[Mapping]) -> list[str]:
    """Hosts with a GPU the straggler detector flagged (the record's per-GPU ``straggler``)."""
    return sorted({str(row["host"]) for row in per_gpu or [] if isinstance(row, Mapping) and row.get("straggler")
                   and row.get("host")})


def public_job(job: JobRow, index: int, nodes: Mapping[str, NodeInfo], *, score_below: float = WASTE_SCORE_BELOW,
               idle_share: float = WASTE_IDLE_SHARE) -> dict:
    """The job as an answer shows it: everything for a job the viewer may see; for another project's job
    only what the aggregates already say (GPUs, score, limiter, where), with no id, name, user, account
    or link."""
    waste = job_lost_per_hour(job, nodes)
    groups = sorted({nodes[h].group for h in job.nodes if h in nodes and nodes[h].group is not None})
    switches = sorted({s for h in job.nodes if h in nodes for s in nodes[h].switches}, key=_switch_order)
    row = {
        "index": index, "visible": job.visible,
        "cluster": job.cluster if job.visible else None, "job_id": job.job_id if job.visible else None,
        "name": job.name if job.visible else None, "user": job.user if job.visible else None,
        "account": job.account if job.visible else None, "url": job.url if job.visible else None,
        "label": f"{job.cluster}/{job.job_id} {job.name}".strip() if job.visible else HIDDEN_LABEL,
        "gpus": job.gpus, "nodes": len(job.nodes), "score": finite(job.score),
        "compute": finite(job.compute), "memory": finite(job.memory), "limiter": job.limiter or None,
        "idle_gpus": job.idle_gpus, "stragglers": job.stragglers, "hours": round(job.hours, 2),
        "gpu_hours_lost_per_hour": round(waste.lost, 2),
        "gpu_hours_lost_by_job_per_hour": round(waste.own, 2),
        "gpu_hours_lost_to_hardware_per_hour": round(waste.hardware_gpu_hours, 2),
        "hardware_hosts": [host for host, _ in waste.hardware_hosts] if job.visible else [],
        "lost_by_job_share": None if waste.own_share is None else round(waste.own_share, 4),
        "headroom_gpu_hours_per_hour": None if waste.headroom is None else round(waste.headroom, 2),
        "wasteful": rank_key(waste, score=job.score, gpus=job.gpus, idle_gpus=job.idle_gpus, score_below=score_below,
                             idle_share=idle_share)[0] == 0,
        "warming_up": job.warming_up, "groups": groups, "switches": switches,
    }
    return row


def worst_jobs(rows: list[dict], limit: int = 5) -> list[dict]:
    """The visible running jobs that lose GPU-hours, none warming up, in ``apps.saturation.waste.rank_key``'s order
    (the wasteful ones first, then by GPU-hours lost by the job per hour; ties: lower score first)."""
    mine = [row for row in rows if row["visible"] and row["gpu_hours_lost_per_hour"] > 0 and not row.get("warming_up")]
    mine.sort(key=lambda row: (not row["wasteful"], -row["gpu_hours_lost_by_job_per_hour"],
                               row["score"] if row["score"] is not None else 101))
    return mine[:limit]


def node_map_payload(jobs: list[JobRow], nodes: Mapping[str, NodeInfo], order: list[str]) -> dict:
    """Compact per-node arrays for the map, in ``order`` (the drawing's node order): the index of the
    running job on each node (-1: free), the straggler flag and the vetting state (index into ``vetting``)."""
    on_node: dict[str, int] = {}
    straggling: set[str] = set()
    for index, job in enumerate(jobs):
        for host in job.nodes:
            on_node.setdefault(host, index)
        straggling.update(job.straggler_hosts)
    vetting_states = sorted({nodes[h].vetting for h in order if h in nodes} | {"healthy"})
    position = {state: i for i, state in enumerate(vetting_states)}
    return {
        "job": [on_node.get(host, -1) for host in order],
        "straggler": [1 if host in straggling else 0 for host in order],
        "vetting_states": vetting_states,
        "vetting": [position[nodes[host].vetting] if host in nodes else position["healthy"] for host in order],
    }
