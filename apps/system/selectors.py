"""Reads of the system page and its API: the running jobs with their saturation records, where they sit on
the dragonfly, the vetting state of every node, and who may see which job.

Visibility: everyone signed in sees the aggregates (load per group and switch, totals, histogram, the
coloured map). A job's id, name, user, account and link appear only where the jobs app's rule
(``apps.jobs.selectors.job_list_for_user``: its user, members of its account, staff) lets the viewer see
the job; every other job still counts in the aggregates and shows as "another project's job".
"""
from __future__ import annotations

import threading
from datetime import timedelta

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.jobs.choices import JobStateChoices
from apps.jobs.models import Job
from apps.jobs.selectors import job_list_for_user
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.models import JobSaturation
from apps.topology.selectors import topology_current
from apps.vetting.selectors import node_states as vetting_node_states

from . import overview
from .machine_map import map_layout

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}

_layout_lock = threading.Lock()
_layout_cache: dict = {"topology": None, "layout": None}


def machine_layout(topology) -> dict:
    """The drawing of ``topology`` (cached per process while the stored topology stays the same object)."""
    with _layout_lock:
        if _layout_cache["topology"] is not topology:
            _layout_cache.update(topology=topology, layout=map_layout(topology))
        return _layout_cache["layout"]


def node_map(topology) -> dict[str, overview.NodeInfo]:
    """hostname -> group, switches of its NICs (in NIC order) and vetting state, for every node."""
    vetting = vetting_node_states()
    return {node.hostname: overview.NodeInfo(
                group=node.group,
                switches=tuple(f"{nic.group}.{nic.switch}" for nic in sorted(node.nics, key=lambda nic: nic.index)),
                vetting=vetting.get(node.hostname, "healthy"))
            for node in topology.nodes}


def _records(job_pks: list[int]) -> dict[int, dict]:
    fields = ("job_id", "score", "compute", "memory", "limiter", "idle_gpus", "per_gpu", "stragglers", "computed")
    return {row["job_id"]: row for row in JobSaturation.objects.filter(
        job_id__in=job_pks, status=JobSaturationStatusChoices.STATUS_READY).values(*fields)}


def _percent(value):
    return None if value is None else round(100.0 * value, 1)


def _row(job: Job, record: dict | None, visible: bool, now) -> overview.JobRow:
    window = job.run_window(now)
    hours = (window[1] - window[0]).total_seconds() / 3600.0 if window else 0.0
    per_gpu = list((record or {}).get("per_gpu") or [])
    score = (record or {}).get("score")
    return overview.JobRow(
        key=str(job.pk), cluster=job.cluster.name, job_id=job.display_id, name=job.name, user=job.user_name,
        account=job.account, gpus=int(job.gpus or 0), nodes=list(job.node_list or []), visible=visible,
        score=score, compute=_percent((record or {}).get("compute")), memory=_percent((record or {}).get("memory")),
        limiter=(record or {}).get("limiter") or "", idle_gpus=int((record or {}).get("idle_gpus") or 0),
        idle_gpu_list=overview.idle_gpus_of(per_gpu), per_gpu=per_gpu,
        stragglers=len((record or {}).get("stragglers") or []),
        straggler_hosts=sorted(set(overview.straggler_hosts_of(per_gpu)) | {
            host for item in (record or {}).get("stragglers") or [] if isinstance(item, dict)
            for host in (item.get("hosts") or ([item["host"]] if item.get("host") else []))}),
        hours=hours, url=reverse("jobs:detail", args=[job.cluster.name, job.job_id]),
        running=job.state == JobStateChoices.RUNNING,
        window_hours={name: overview.overlap_hours(window[0], window[1], now - length, now) if window else 0.0
                      for name, length in WINDOWS.items()},
    )


def _jobs_since(since, cluster: str | None):
    """Jobs that ran at some time after ``since`` (running, or ended after it), for the histogram."""
    queryset = (Job.objects.select_related("cluster").exclude(start_time=None)
                .exclude(state=JobStateChoices.PENDING)
                .filter(Q(end_time__isnull=True) | Q(end_time__gte=since)))
    if cluster:
        queryset = queryset.filter(cluster__name=cluster)
    return queryset.only("pk", "cluster__name", "job_id", "array_job_id", "array_task_id", "het_job_id", "het_offset",
                         "name", "user_name", "account", "state", "start_time", "end_time", "gpus", "node_list")


def system_overview(user, cluster: str | None = None, now=None, *, histogram: bool = True) -> dict:
    """Everything the system page and ``GET /api/v1/system/overview/`` show, as ``user`` may see it.
    ``histogram=False`` (the page's first screen) reads the running jobs only and leaves the histogram out."""
    now = now or timezone.now()
    since = now - max(WINDOWS.values())
    jobs = _jobs_since(since, cluster)
    if not histogram:
        jobs = jobs.filter(state=JobStateChoices.RUNNING)
    jobs = list(jobs)
    visible_pks = set(job_list_for_user(user).filter(pk__in=[job.pk for job in jobs]).values_list("pk", flat=True))
    records = _records([job.pk for job in jobs])
    rows = [_row(job, records.get(job.pk), job.pk in visible_pks, now) for job in jobs]
    running = [row for row in rows if row.running]
    running.sort(key=lambda row: (-row.gpus, row.cluster, row.job_id))

    topology = topology_current()
    nodes = node_map(topology)
    groups, switches = overview.location_load(running, nodes)
    public = [overview.public_job(row, index, nodes) for index, row in enumerate(running)]
    newest = max((records[int(row.key)]["computed"] for row in running
                  if int(row.key) in records and records[int(row.key)]["computed"] is not None), default=None)
    totals = overview.totals(running)
    return {
        "generated": now,
        "cluster": cluster,
        "totals": totals,
        "coverage": {"running_jobs": totals["running_jobs"], "scored_jobs": totals["scored_jobs"], "newest_score": newest,
                     "note": "S is each job's steady-state mean from its latest saturation record, "
                             "not a value at this moment."},
        "jobs": public,
        "worst_jobs": overview.worst_jobs(public),
        "groups": groups,
        "switches": switches,
        "network": None,
        "network_note": overview.NETWORK_NOTE,
        "histogram": {name: overview.histogram(rows, name) for name in WINDOWS} if histogram else None,
        "histogram_note": ("Each job's steady-state score (per GPU where known) spread over its whole overlap with the "
                           "window: GPU-hours at each saturation level, not when they happened."),
        "_running_rows": running,
        "_nodes": nodes,
        "_topology": topology,
    }


def system_histogram(user, cluster: str | None = None, now=None) -> dict:
    """The saturation histogram over the last 24 h and 7 days (aggregates only: the same for every viewer)."""
    answer = system_overview(user, cluster, now)
    return {"generated": answer["generated"], "histogram": answer["histogram"], "note": answer["histogram_note"]}


def system_map(user, cluster: str | None = None, now=None) -> dict:
    """The running jobs' overview (no histogram) plus the compact node arrays of the dragonfly drawing."""
    answer = system_overview(user, cluster, now, histogram=False)
    layout = machine_layout(answer["_topology"])
    answer["map"] = {**layout, **overview.node_map_payload(answer["_running_rows"], answer["_nodes"], layout["hosts"])}
    return answer
