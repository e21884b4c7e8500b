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
from types import SimpleNamespace

import numpy as np
import pandas as pd
from django.conf import settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.jobs.choices import JobStateChoices
from apps.jobs.models import Job
from apps.jobs.selectors import job_list_for_user
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.models import JobSaturation
from apps.saturation.selectors import record_warming_up, reference_scores
from apps.saturation.waste import steady_seconds
from apps.telemetry.backends.base import Query, TelemetryUnavailable, TierError
from apps.telemetry.selectors import readable_step
from apps.telemetry.store import telemetry_store
from apps.topology.selectors import topology_current
from apps.vetting.models import NodeHealth, NodeHealthEvent, VettingResult
from apps.vetting.selectors import node_states as vetting_node_states

from . import overview
from .machine_map import map_layout
from .node_history import ANOTHER as ANOTHER_JOB
from .node_history import step_for

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
    fields = ("job_id", "score", "compute", "memory", "limiter", "idle_gpus", "per_gpu", "stragglers", "computed",
              "steady_start", "steady_found", "scored_until", "gpu_model")
    return {row["job_id"]: row for row in JobSaturation.objects.filter(
        job_id__in=job_pks, status=JobSaturationStatusChoices.STATUS_READY).values(*fields)}


def _percent(value):
    return None if value is None else round(100.0 * value, 1)


def _row(job: Job, record: dict | None, visible: bool, now, references: dict | None = None) -> overview.JobRow:
    window = job.run_window(now)
    warm = bool(record) and record_warming_up(job, SimpleNamespace(**record), now)
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
        straggler_findings=[item for item in (record or {}).get("stragglers") or [] if isinstance(item, dict)],
        steady_s=steady_seconds((record or {}).get("steady_start"), (record or {}).get("scored_until")),
        warming_up=warm, reference=(references or {}).get((record or {}).get("gpu_model") or ""),
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
    references = reference_scores()
    rows = [_row(job, records.get(job.pk), job.pk in visible_pks, now, references) for job in jobs]
    running = [row for row in rows if row.running]
    running.sort(key=lambda row: (-row.gpus, row.cluster, row.job_id))

    topology = topology_current()
    nodes = node_map(topology)
    groups, switches = overview.location_load(running, nodes)
    public = [overview.public_job(row, index, nodes, score_below=settings.WASTE_SCORE_BELOW,
                                  idle_share=settings.WASTE_IDLE_SHARE) for index, row in enumerate(running)]
    newest = max((records[int(row.key)]["computed"] for row in running
                  if int(row.key) in records and records[int(row.key)]["computed"] is not None), default=None)
    totals = overview.totals(running, nodes)
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


# --- network load per group pair and file-system load (switch port counters, Lustre job statistics) --------------

NETWORK_MINUTES = 10  # counters read back this far for "now"
MAX_IO_JOBS = 200  # running jobs whose Lustre series are read for the file-system load (largest first)

_ports_lock = threading.Lock()
_ports_cache: dict = {"topology": None, "ports": None}


def port_map(topology):
    """The topology's ports placed by the cabling convention (cached per process while the topology stays)."""
    from apps.topology.link_load import PortMap

    with _ports_lock:
        if _ports_cache["topology"] is not topology:
            _ports_cache.update(topology=topology, ports=PortMap(topology))
        return _ports_cache["ports"]


def _network_cluster(cluster: str | None) -> str | None:
    from apps.jobs.selectors import cluster_list

    if cluster:
        return cluster
    first = cluster_list().values_list("name", flat=True).first()
    return first


def _running_job_groups(user, cluster: str | None, topology) -> tuple[dict[str, set[int]], list]:
    """label -> groups of its nodes for the running jobs (largest first); labels name only jobs ``user`` may see."""
    group_of = {node.hostname: node.group for node in topology.nodes}
    jobs = Job.objects.filter(state=JobStateChoices.RUNNING).select_related("cluster")
    if cluster:
        jobs = jobs.filter(cluster__name=cluster)
    jobs = sorted(jobs, key=lambda job: (-len(job.node_list or []), job.job_id))
    visible = set(job_list_for_user(user).filter(pk__in=[job.pk for job in jobs]).values_list("pk", flat=True))
    labels: dict[str, set[int]] = {}
    hidden = 0
    for job in jobs:
        label = str(job.job_id) if job.pk in visible else None
        if label is None:
            hidden += 1
            label = f"another project's job ({hidden})" if hidden > 1 else "another project's job"
        labels[label] = {group_of[host] for host in (job.node_list or []) if host in group_of}
    return labels, jobs


def network_loads(cluster: str | None = None, now=None):
    """(LinkLoad, cluster) from the switch port counters of the last ``NETWORK_MINUTES``; (None, cluster) without."""
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.fabric import counter_rates
    from apps.telemetry.store import telemetry_store
    from apps.topology.link_load import link_load

    now = now or timezone.now()
    cluster = _network_cluster(cluster)
    topology = topology_current()
    if not cluster or not topology.switches:
        return None, cluster
    try:
        frame = telemetry_store().read_net(cluster, fields=["port_tx_bytes", "port_rx_bytes"],
                                           start=now - timedelta(minutes=NETWORK_MINUTES), end=now)
    except TelemetryUnavailable:
        return None, cluster
    switch_hosts = frame["host"].str.startswith("x") if len(frame) else None
    if switch_hosts is not None:
        frame = frame[switch_hosts]
    if not len(frame):
        return None, cluster
    rates = counter_rates(frame)
    load = link_load(port_map(topology), zip(rates["host"], rates["nic"], rates["field"], rates["rate"]))
    return load, cluster


def system_network(user, cluster: str | None = None, now=None) -> dict:
    """Network load per group pair (verdict, matrix, busiest pairs with the jobs sharing them) and file-system load."""
    from . import network

    now = now or timezone.now()
    load, cluster = network_loads(cluster, now)
    topology = topology_current()
    job_groups, jobs = _running_job_groups(user, cluster, topology)
    summary = network.network_summary(load, list(topology.groups), job_groups, minutes=NETWORK_MINUTES)
    return {"cluster": cluster, "network": summary, "filesystem": filesystem_load(user, jobs, job_groups, now),
            "_load": load}


def filesystem_load(user, jobs: list, job_groups: dict, now) -> dict:
    """The running jobs' latest Lustre read/write rates, summed (apps.telemetry.lustre.job_io per job)."""
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.lustre import job_io
    from apps.telemetry.store import telemetry_store

    from . import network

    labels = list(job_groups)
    rates, read = [], 0
    try:
        store = telemetry_store()
        for job, label in list(zip(jobs, labels))[:MAX_IO_JOBS]:
            frame = store.read_job_series(job.cluster.name, job.job_id, start=now - timedelta(minutes=NETWORK_MINUTES),
                                          end=now)
            read += 1
            if frame is None or frame.empty:
                continue
            frame = frame[frame["name"].astype(str).str.startswith("lustre/")]
            io = job_io(frame, 60) if len(frame) else None
            if io is None or io.empty:
                continue
            latest = io.iloc[-1].to_dict()
            latest["label"] = f"job {label}" if not label.startswith("another") else label
            rates.append(latest)
    except TelemetryUnavailable:
        pass
    return network.filesystem_summary(rates, read, len(jobs))


# -- a node's own history (issue 39: /nodes/<host>/, GET /api/v1/nodes/<host>/history/) ------------------------------

NODE_JOBS_MAX, NODE_VETTING_MAX = 500, 2000


def node_jobs(host: str):
    """Every job that ran (or runs) on ``host``, newest first (``Job.node_search``: ",nid1,nid2,")."""
    return Job.objects.select_related("cluster").filter(node_search__contains=f",{host},")


def node_known(host: str) -> bool:
    """A node the portal knows of: a job ran on it, or it has vetting results or a health record."""
    return (node_jobs(host).exists() or VettingResult.objects.filter(host=host).exists()
            or NodeHealth.objects.filter(host=host).exists())


def node_may_see(user, host: str) -> bool:
    """Staff, and people who may see a job that ran on the node (its user, its account's members: the jobs app's
    rule). Job tokens never: a node's history spans other jobs."""
    if not getattr(user, "is_authenticated", False) or getattr(user, "job", None) is not None:
        return False
    if user.is_staff:
        return node_known(host)
    return job_list_for_user(user).filter(node_search__contains=f",{host},").exists()


def _bucket_iso(values) -> list[str]:
    return [pd.Timestamp(v).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") if pd.Timestamp(v).tzinfo
            else pd.Timestamp(v).strftime("%Y-%m-%dT%H:%M:%SZ") for v in values]


def node_history(user, host: str, since, until) -> dict:
    """The node's history in [since, until) as the API answers it (``node_history.figure`` draws it). The jobs are
    named and linked only where the viewer may see them; others are "another project's job"."""
    step = step_for((until - since).total_seconds())
    step = readable_step(since, step) or step  # never finer than the tier that still holds the window (issue 40)
    grid = pd.date_range(pd.Timestamp(since).floor(f"{step}s"), pd.Timestamp(until), freq=f"{step}s", inclusive="left")
    position = {int(t.value): i for i, t in enumerate(grid)}
    blank = [None] * len(grid)
    overlapping = list(node_jobs(host).filter(start_time__lt=until).filter(Q(end_time__gte=since) | Q(end_time__isnull=True))
                       .order_by("-start_time")[:NODE_JOBS_MAX])
    visible = set(job_list_for_user(user).filter(pk__in=[job.pk for job in overlapping]).values_list("pk", flat=True))
    jobs = []
    for job in sorted(overlapping, key=lambda j: j.start_time):
        seen = job.pk in visible
        label = f"{job.name or 'job'} ({job.cluster.name}/{job.job_id})" if seen else ANOTHER_JOB
        jobs.append({"label": label, "visible": seen, "start": _bucket_iso([job.start_time])[0],
                     "end": _bucket_iso([job.end_time])[0] if job.end_time else None,
                     "url": reverse("jobs:detail", args=[job.cluster.name, job.job_id]) if seen else None,
                     "state": job.state})
    latest = node_jobs(host).order_by("-start_time").values_list("cluster__name", flat=True).first()
    cluster = latest or "alps"

    def series(frame, key, value):
        out: dict[str, list] = {}
        for name, part in frame.groupby(key):
            values = list(blank)
            for bucket, number in zip(part["bucket"], part[value]):
                at = position.get(int(pd.Timestamp(bucket).value))
                if at is not None and np.isfinite(number):
                    values[at] = round(float(number), 4)
            out[str(name)] = values
        return out

    gpus, cache, nics, host_rows, problems = {}, {}, {}, {}, []
    try:
        store = telemetry_store()
        frame = store.aggregate(Query(start=since, end=until, cluster=cluster, hosts=(host,), fields=(1002,)), step,
                                stats=("mean",))
        gpus = series(frame, "gpu", "mean") if len(frame) else {}
        hosted = store.aggregate_host(cluster, step, hosts=[host], start=since, end=until,
                                      fields=["host_cpu_busy", "host_mem_used", "host_mem_total", "host_gpu_page_cache"])
        if len(hosted):
            gpu_part = hosted[hosted["field"] == "host_gpu_page_cache"]
            cache = series(gpu_part.assign(gpu=gpu_part["domain"].str[3:]), "gpu", "last") if len(gpu_part) else {}
            node = hosted[hosted["domain"] == "node"].pivot_table(index="bucket", columns="field", values="last")
            for key in ("host_cpu_busy", "host_mem_used", "host_mem_total"):
                if key not in node:
                    node[key] = np.nan
            node = node.reset_index().assign(used=lambda f: f["host_mem_used"] / f["host_mem_total"], name="node")
            host_rows = {"cpu_busy": series(node, "name", "host_cpu_busy").get("node", list(blank)),
                         "mem_used": series(node, "name", "used").get("node", list(blank))}
        sent = store.aggregate_net(cluster, step, hosts=[host], fields=["nic_tx_bytes"], start=since, end=until)
        if len(sent):
            sent = sent.sort_values(["nic", "bucket"])
            sent["rate"] = sent.groupby("nic")["last"].diff() / step
            sent.loc[sent["rate"] < 0, "rate"] = np.nan  # a counter reset
            nics = series(sent.dropna(subset=["rate"]), "nic", "rate")
    except TelemetryUnavailable as exc:
        problems.append(f"the telemetry store cannot be read now: {exc}")
    except TierError as exc:
        problems.append(str(exc))
    results = (VettingResult.objects.filter(host=host, time__gte=since, time__lt=until).order_by("time")
               .values("time", "eval_name", "outcome")[:NODE_VETTING_MAX])
    vetting = [{"time": _bucket_iso([r["time"]])[0], "eval_name": r["eval_name"], "outcome": r["outcome"]} for r in results]
    health = [{"time": _bucket_iso([e.created])[0], "from_state": e.from_state, "to_state": e.to_state,
               "action": e.action, "reason": e.reason}
              for e in NodeHealthEvent.objects.filter(host=host, created__gte=since, created__lt=until).order_by("created")]
    state = NodeHealth.objects.filter(host=host).values_list("state", flat=True).first() or "healthy"
    return {"host": host, "cluster": cluster, "since": _bucket_iso([since])[0], "until": _bucket_iso([until])[0],
            "step": step, "times": _bucket_iso(grid), "state": state, "gpus": gpus, "gpu_page_cache": cache,
            "nics": nics, "host_metrics": host_rows, "jobs": jobs, "vetting": vetting, "health": health,
            "problems": problems}
