"""The job page's "Stuck collectives" panel and the first screen's culprit.

* **First screen** (:func:`summary`): a hang or mismatch the job's Flight Recorder dumps show, as a critical
  finding right after how the job ended: the culprit placed on its node and GPU with the hardware's evidence
  ("nid001234 GPU 2 (PP stage 5, DP replica 12): rank 1,234 never entered all_reduce #5,678 of data-parallel group
  17 (511 of 512 ranks waited 600 s); XID 79 at 10:02:11 UTC") and one thing to do.
* **The panel** (:func:`context`): the verdict first, the culprits on the topology (the job's nodes per dragonfly
  group, the culprits' nodes marked), the rank x sequence view of the disagreeing group, each culprit's place and
  evidence, and the last entries of the culprits and a few peers with their stack frames when the dump has them.
  A job without dumps gets how to collect them.
"""
from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.urls import reverse

from apps.core.panels import Fact, Finding, PanelSummary

from . import selectors

KEY = "flightrec"
TTL = 600
MAX_NODES_DRAWN = 512


def _body(job) -> dict | None:
    analysis = selectors.flight_analysis_get(job)
    if analysis is None:
        return None
    key = "flightrec:body:" + hashlib.sha256(f"{job.pk}|{analysis.modified.isoformat()}|{analysis.status}".encode()).hexdigest()[:32]
    body = cache.get(key)
    if body is None:
        body = selectors.flight_body(job)
        cache.set(key, body, TTL)
    return body


def version(job) -> str | None:
    analysis = selectors.flight_analysis_get(job)
    return None if analysis is None else "f" + hashlib.sha256(f"{job.pk}|{analysis.modified.isoformat()}".encode()).hexdigest()[:20]


def _action(body: dict) -> str:
    culprits = body.get("culprits") or []
    first = culprits[0] if culprits else {}
    host = first.get("host")
    hardware = any(e["level"] == "critical" and e["kind"] in ("gpu_health", "telemetry") for e in first.get("evidence", []))
    if body.get("status") == "mismatch":
        return ("The ranks called the collective differently (another shape, dtype or op): look at the culprits' "
                "stack frames below for the code path that differs, then resubmit")
    if hardware and host:
        return f"Drain {host} (its GPU failed under the job) and resubmit without it: sbatch --exclude={host}"
    if host:
        return (f"Read the culprit's last entries and stack below (it was elsewhere: data loading, a Python hang, another "
                f"group); if it points at the hardware, resubmit with --exclude={host}")
    return "Read the per-rank last entries below"


def summary(job) -> PanelSummary | None:
    body = _body(job)
    if body is None:
        return None
    status = body.get("status")
    if status in ("hang", "mismatch"):
        return PanelSummary(
            facts=[Fact("Stuck collective", status, detail=body.get("verdict", ""), level="critical", element_id="fact-flightrec")],
            findings=[Finding(level="critical", title=body.get("headline") or body.get("verdict", ""), action=_action(body),
                              link=f"#panel-{KEY}", source=KEY, rank=1)])
    if status == "incomplete":
        return PanelSummary(findings=[Finding(level="warning", title=f"Flight Recorder: {body.get('verdict', '')}",
                                              action="Collect the missing ranks' dumps (the epilog posts what it finds)",
                                              link=f"#panel-{KEY}", source=KEY, rank=5)])
    if status == "healthy":
        return PanelSummary(facts=[Fact("Flight Recorder", "no stuck collective", detail=body.get("verdict", ""), level="ok")])
    return None


def _topology(job, body: dict) -> list[dict]:
    """The job's nodes per dragonfly group, the culprits' nodes marked (at most MAX_NODES_DRAWN drawn)."""
    from apps.topology.selectors import topology_index_current

    index = topology_index_current()
    culprits = {}
    for culprit in body.get("culprits") or []:
        if culprit.get("host"):
            culprits.setdefault(culprit["host"], []).append(culprit)
    groups: dict = {}
    for host in list(job.node_list or [])[:MAX_NODES_DRAWN] + [h for h in culprits if h not in set(job.node_list or [])]:
        row = index.row_of.get(host)
        group = int(index.groups[index.node_group[row]]) if row is not None else None
        mine = culprits.get(host, [])
        groups.setdefault(group, []).append({
            "host": host, "culprit": bool(mine),
            "title": host + "".join(f" — rank {c['rank']} GPU {c['gpu']}: {c['reason']}" for c in mine)})
    drawn = [{"group": group, "nodes": nodes, "culprit": any(n["culprit"] for n in nodes)}
             for group, nodes in sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0))]
    return drawn


def context(job, request) -> dict:
    body = _body(job)
    url = reverse("flightrec-api:flight-recorder", args=[job.cluster.name, job.job_id])
    if body is None:
        return {"flightrec": None, "flightrec_url": url}
    culprits = {c["rank"] for c in body.get("culprits") or []}
    entries = []
    for rank, items in (body.get("last_entries") or {}).items():
        entries.append({"rank": int(rank), "entries": items})
    return {"flightrec": body, "flightrec_url": url, "flightrec_topology": _topology(job, body),
            "flightrec_entries": sorted(entries, key=lambda item: (item["rank"] not in culprits, item["rank"])),
            "flightrec_culprit_count": body.get("culprit_count", len(body.get("culprits") or []))}
