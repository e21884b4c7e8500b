"""The job in context: a section of the job page (registered in apps.py) and its warning on the first screen.

For the job's window it reads the other jobs that overlapped it on the same cluster, keeps those that ran
on the job's dragonfly groups (``context.job_context``, plain Python, decides), with their saturation
record, and, when the job reported a Megatron layout, which pipeline-stage boundaries leave a group. Cheap:
a handful of row queries and the process-cached topology; no product files.

Who may see what (the jobs access rule, ``apps.jobs.selectors``): another job is named and linked only when
the viewer may see it; otherwise it is "another project's job" with its load, never its name, id or user.
The panel's HTML is cached per viewer (``apps.jobs.pagecache``), so each viewer sees the jobs they may see
and no other viewer's. The first screen is shared by everybody: its finding never names a job.
"""
from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.core.numbers import clock
from apps.core.panels import Finding, JobPanel, PanelSummary, register_job_panel
from apps.jobs.choices import JobStateChoices
from apps.jobs.selectors import job_list_for_user
from apps.ranks.layout import LayoutError, ParallelSizes, RankLayout, block_placement
from apps.ranks.selectors import job_layout_get
from apps.saturation.choices import JobSaturationStatusChoices
from apps.topology.selectors import topology_current

from .context import HIGH_LINK, NOT_MEASURED, JobContext, Other, crowding_finding, job_context, load_words

KEY = "context"
ANCHOR = "#panel-context"
MAX_OTHERS = 5000  # jobs overlapping a window read at most (newest first): a bound on the cost of very long windows
ANOTHER = "another project's job"
_CACHE = "_system_context"
# The other jobs' saturation record, read with them (one query): JobSaturation's reverse name is "saturation".
SCORE_FIELDS = tuple(f"saturation__{name}" for name in ("status", "score", "compute", "memory", "link", "limiter"))
_placements: dict = {}


def _placement(topology) -> tuple[dict, dict, dict]:
    """host -> (group, switches), group -> nodes, group -> hosts; per topology object (it is cached per process)."""
    found = _placements.get(id(topology))
    if found is None or found[0] is not topology:
        placement, group_nodes, group_hosts = {}, {}, {}
        for node in topology.nodes:
            placement[node.hostname] = (node.group, tuple((nic.group, nic.switch) for nic in node.nics))
            group_nodes[node.group] = group_nodes.get(node.group, 0) + 1
            group_hosts.setdefault(node.group, set()).add(node.hostname)
        _placements.clear()
        found = _placements[id(topology)] = (topology, (placement, group_nodes, group_hosts))
    return found[1]


def _pipelines(stored, job) -> list[list[str]] | None:
    """Per pipeline, the host of each stage, from the job's reported layout; None without one (or one that no longer fits)."""
    if stored is None or stored.pp < 2:
        return None
    try:
        layout = RankLayout(ParallelSizes(tp=stored.tp, pp=stored.pp, cp=stored.cp, ep=stored.ep, etp=stored.etp, dp=stored.dp,
                                          vpp=stored.vpp, order=stored.order, num_layers=stored.num_layers,
                                          first_stage_layers=stored.first_stage_layers,
                                          last_stage_layers=stored.last_stage_layers), stored.world_size)
        hosts = ([host for host, _local in stored.rank_map] if stored.rank_map else
                 [host for host, _local in block_placement(stored.world_size, list(job.node_list), stored.tasks_per_node)])
    except (LayoutError, TypeError, ValueError):
        return None
    return [[hosts[rank] for rank in row] for row in layout.groups_array("pp").tolist()]


def job_in_context(job, now: datetime | None = None) -> tuple[JobContext, dict] | None:
    """The job's context, the rows of the other jobs in it (pk -> row) and whether it has a layout; None for a job that has not run
    or has no nodes. Read once per job object."""
    cached = job.__dict__.get(_CACHE)
    if cached is not None:
        return cached
    window = job.run_window(now or timezone.now(), open_end=True) if job.node_list else None
    if window is None:
        return None
    start, end = window
    placement, group_nodes, group_hosts = _placement(topology_current())
    nearby = set()
    for group in {placement[h][0] for h in job.node_list if h in placement}:
        nearby |= group_hosts.get(group, set())
    overlapping = (job.__class__.objects.filter(cluster_id=job.cluster_id, start_time__isnull=False)
                   .exclude(pk=job.pk).exclude(state=JobStateChoices.PENDING)
                   .filter(Q(end_time__isnull=True) | Q(end_time__gt=start)))
    if end is not None:
        overlapping = overlapping.filter(start_time__lt=end)
    rows = {}
    ready = JobSaturationStatusChoices.STATUS_READY
    for row in overlapping.order_by("-start_time").values("pk", "job_id", "array_job_id", "array_task_id", "name", "user_name",
                                                            "account", "node_list", "start_time", "end_time", "gpus", "state",
                                                            *SCORE_FIELDS)[:MAX_OTHERS]:
        if nearby.intersection(row["node_list"] or ()):
            rows[row["pk"]] = row
    others = []
    for pk, row in rows.items():
        scored = row["saturation__status"] == ready
        score = {name: row[f"saturation__{name}"] if scored else None for name in ("score", "compute", "memory", "link", "limiter")}
        end_time = None if row["state"] == JobStateChoices.RUNNING else row["end_time"]
        others.append(Other(key=pk, hosts=tuple(row["node_list"] or ()), start=row["start_time"], end=end_time,
                            gpus=row["gpus"] or 0, score=score["score"], compute=score["compute"], memory=score["memory"],
                            link=score["link"], limiter=score["limiter"] or ""))
    stored = job_layout_get(job)
    found = job_context(hosts=list(job.node_list), window=(start, end), placement=placement, others=others,
                        group_nodes=group_nodes, pipelines=_pipelines(stored, job))
    cached = (found, rows, stored is not None)
    job.__dict__[_CACHE] = cached
    return cached


def _named(job, request, rows: dict) -> set[int]:
    """The neighbours this viewer sees by name: those the jobs access rule lets them see (the panel's HTML
    is cached per viewer, so nobody else is served these names)."""
    if not rows:
        return set()
    return set(job_list_for_user(request.user).filter(pk__in=list(rows)).values_list("pk", flat=True))


def context(job, request) -> dict:
    found = job_in_context(job)
    if found is None:
        return {"job_context": None, "context_not_measured": NOT_MEASURED}
    result, rows, has_layout = found
    named = _named(job, request, rows)
    now = timezone.now()
    labels = {}
    for neighbour in result.neighbours:
        pk = neighbour.other.key
        if pk in named:
            row = rows[pk]
            display = (f"{row['array_job_id']}_{row['array_task_id']}" if row["array_job_id"] and row["array_task_id"] is not None
                       else str(row["job_id"]))
            labels[pk] = {"label": f"{job.cluster.name}/{display} {row['name']}".strip(), "user": row["user_name"],
                          "url": reverse("jobs:detail", args=[job.cluster.name, row["job_id"]])}
        else:
            labels[pk] = {"label": ANOTHER, "user": None, "url": None}

    def neighbour_row(neighbour):
        other = neighbour.other
        return {**labels[other.key], "groups": ", ".join(str(g) for g in neighbour.groups), "nodes": neighbour.nodes_in_groups,
                "switches": neighbour.switches, "gpus": other.gpus, "since": clock(neighbour.since, now),
                "until": clock(neighbour.until, now) if neighbour.until else None, "score": _score(other.score),
                "link": _pct(other.link), "compute": _pct(other.compute), "memory": _pct(other.memory),
                "limiter": other.limiter or "–",
                "load": load_words(other), "heavy": other.high_link}

    def boundary_row(boundary):
        scored = [n for n in boundary.neighbours if n.other.link is not None]  # the evidence: jobs with a known load
        return {"words": boundary.words, "pipelines": boundary.pipelines, "of": boundary.of,
                "neighbours": [{**labels[n.other.key], "load": load_words(n.other), "since": clock(n.since, now),
                                "until": clock(n.until, now) if n.until else None,
                                "groups": ", ".join(str(g) for g in n.groups), "heavy": n.other.high_link} for n in scored[:3]],
                "more": len(boundary.neighbours) - len(scored[:3]), "unscored": len(boundary.neighbours) - len(scored)}

    boundaries = [boundary_row(b) for b in result.boundaries]
    crowding = crowding_finding(result, lambda moment: clock(moment, now))
    return {"job_context": {
        "verdict": crowding[0] if crowding else _verdict(result),
        "level": "warning" if crowding else "info",
        "groups": [{"group": g.group, "job_nodes": g.job_nodes, "nodes": g.nodes, "neighbours": g.neighbours,
                    "neighbour_nodes": g.neighbour_nodes, "share": None if g.share is None else round(100 * g.share),
                    "mean_score": _score(g.mean_score), "top_link": _pct(g.top_link),
                    "heavy": g.top_link is not None and g.top_link >= HIGH_LINK,
                    "url": reverse("topology:group", args=[g.group])} for g in result.groups],
        "neighbours": [neighbour_row(n) for n in result.neighbours[:50]],
        "neighbours_more": max(0, len(result.neighbours) - 50),
        "boundaries": boundaries, "has_layout": has_layout,
        "job_switches": result.job_switches, "shared_switches": result.shared_switches,
        "unplaced": list(result.unplaced[:10]), "unplaced_count": len(result.unplaced),
        "running": job.end_time is None, "high_link": round(100 * HIGH_LINK),
    }, "context_not_measured": NOT_MEASURED}


def _pct(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.0f} %"


def _score(score: float | None) -> str:
    return "–" if score is None else f"{score:.0f}"


def _verdict(result: JobContext) -> str:
    if not result.groups:
        return "The topology does not know this job's nodes: no context can be given."
    if not result.neighbours:
        return (f"No other job ran on this job's dragonfly group{'s' * (len(result.groups) > 1)} "
                f"({', '.join(str(g.group) for g in result.groups)}) during its run.")
    scored = [n for n in result.neighbours if n.other.link is not None]
    return (f"{len(result.neighbours)} other job{'s' * (len(result.neighbours) > 1)} ran on this job's groups during its run; "
            + (f"none communicates heavily (highest link saturation {100 * max(n.other.link for n in scored):.0f} %)."
               if scored else "none of them is scored yet."))


def summary(job) -> PanelSummary | None:
    found = job_in_context(job)
    if found is None:
        return None
    result = found[0]
    crowding = crowding_finding(result, lambda moment: clock(moment, timezone.now()))
    if crowding is None:
        return None
    title, action = crowding
    return PanelSummary(findings=[Finding("warning", title, action, ANCHOR, KEY)])


def register() -> None:
    """Register the job-in-context panel with apps.core.panels."""
    register_job_panel(JobPanel(key=KEY, title="The job in context", order=35, template="system/_panel_context.html",
                                context=context, summary=summary))
