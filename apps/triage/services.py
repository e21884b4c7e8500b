"""Writes of the triage app: the sync that rebuilds the inbox from its sources, and the staff's state changes.

Every function is one transaction. ``triage_sync`` is idempotent: it upserts by key, so running it twice
changes nothing the second time (but ``last_seen``); see ``inbox.reconcile`` for how states move.
"""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.core.node_findings import by_node, node_findings
from apps.saturation.selectors import job_waste
from apps.vetting.node_states import STATE_WORDS, switch_rows
from apps.vetting.services import TELEMETRY_REASON

from . import selectors
from .choices import TriageItemKindChoices as Kind
from .choices import TriageItemStateChoices as State
from .inbox import Finding, group_arrays, reconcile, straggler_detail
from .models import TriageItem


class TriageError(ValueError):
    """A state change that is not allowed; ``field`` names the input at fault."""

    def __init__(self, message: str, field: str = "state"):
        super().__init__(message)
        self.field = field


# --- the sources -----------------------------------------------------------------------------------
def _job_label(job) -> str:
    return f"{job.cluster.name}/{job.job_id}"


def _job_findings(now: datetime, charges: dict | None = None) -> list[Finding]:
    """Wasteful running jobs (GPU-hours lost over the run so far) and running jobs with stragglers. ``charges``, when
    given, receives what faulty hardware cost each job, by node: ``{host: [(job label, GPU-hours), ...]}``
    (``apps.saturation.waste``: the wait for a GPU the hardware holds down, GPUs on failed nodes)."""
    findings, arrays = [], {}
    records = list(selectors.running_scored_jobs())
    emails = selectors.emails_of(record.job.user_name for record in records)
    for record in records:
        job = record.job
        label, url = _job_label(job), reverse("jobs:detail", args=[job.cluster.name, job.job_id])
        if job.array_job_id:  # a task of a job array: its findings go into the array's one row per kind
            array = f"{job.cluster.name}/{job.array_job_id}"
            arrays[f"{Kind.WASTEFUL_JOB}:{label}"] = arrays[f"{Kind.STRAGGLER}:{label}"] = array
        owner = f"{job.user_name} ({job.account})" if job.account else job.user_name
        reading = job_waste(job, record, now)
        gpus, hours, waste = reading.gpus, reading.hours, reading.waste
        if charges is not None:
            for host, gpu_hours in waste.hardware_hosts:
                charges.setdefault(host, []).append((label, gpu_hours))
        facts = {"job": label, "job_name": job.name, "user": job.user_name, "email": emails.get(job.user_name, ""),
                 "gpus": gpus, "idle_gpus": record.idle_gpus, "score": record.score, "limiter": record.limiter,
                 "hours": round(hours, 3)}
        if job.array_job_id:
            facts["task"] = f"{job.cluster.name}/{job.display_id}"
        if reading.wasteful:
            why = (f"{record.idle_gpus} of {gpus} GPUs idle" if record.idle_gpus else
                   f"steady S = {record.score:.0f}" if record.score is not None else "no score")
            parts = waste.parts_words()
            hardware = (f"; {waste.hardware_gpu_hours:,.1f} more lost to faulty hardware (the node items)"
                        if waste.hardware_gpu_hours >= 0.05 else "")
            detail = (f"{why}; {waste.own:,.1f} of {waste.gpu_hours:,.1f} GPU-hours lost by the job over {hours:,.1f} h"
                      + (f" ({parts})" if parts else "") + hardware
                      + (f" ({waste.unknown_gpus} GPUs without a busy share not counted)" if waste.unknown_gpus else "")
                      + (f"; {waste.headroom:,.1f} GPU-hours of headroom" if waste.headroom else ""))
            findings.append(Finding(key=f"{Kind.WASTEFUL_JOB}:{label}", kind=Kind.WASTEFUL_JOB, severity="warning",
                                    title=f"{label} {job.name} wastes GPUs", detail=detail, owner=owner, url=url,
                                    gpu_hours_lost=round(waste.own, 3), job_pk=job.pk,
                                    data={**facts, "idle_gpu_hours": round(waste.idle_gpu_hours, 3),
                                          "hardware_gpu_hours": round(waste.hardware_gpu_hours, 3),
                                          "headroom_gpu_hours": None if waste.headroom is None else round(waste.headroom, 3)}))
        stragglers = list(record.stragglers or [])
        if stragglers:
            # a GPU or node finding names its host; a switch or group finding its hosts (and no host)
            hosts = sorted({host for item in stragglers if isinstance(item, dict)
                            for host in (item.get("hosts") or ([item["host"]] if item.get("host") else []))})
            findings.append(Finding(key=f"{Kind.STRAGGLER}:{label}", kind=Kind.STRAGGLER, severity="warning",
                                    title=f"{len(stragglers)} straggler finding{'s' * (len(stragglers) != 1)} in {label} {job.name}",
                                    detail=straggler_detail(stragglers), owner=owner, url=url + "#saturation", job_pk=job.pk,
                                    data={**facts, "hosts": hosts}))
    return group_arrays(findings, arrays)


NODE_SEVERITY = {"drained": "info", "in_repair": "info"}  # out of service already: waiting for repair or return


HARDWARE_COST_KINDS = ("throttled_gpu", "hot_gpu", "nic_link", "nic_retries")  # the item a node's cost is put on


def _node_fault_findings(now: datetime, charges: dict | None = None) -> list[Finding]:
    """Hardware faults that running jobs' telemetry finds on nodes (a NIC retrying its packets, a GPU hot or held down:
    ``apps.core.node_findings``): one item per node and kind however many jobs see it, listing those jobs; it clears
    (and resolves) when no running job sees it any more."""
    findings = []
    faults = by_node(node_findings(now))
    # what the node cost the jobs that waited for it goes on one of its items (a GPU held down first), never twice
    costed = {}
    for fault in sorted(faults, key=lambda f: HARDWARE_COST_KINDS.index(f.kind) if f.kind in HARDWARE_COST_KINDS else 99):
        costed.setdefault(fault.host, fault.kind)
    for fault in faults:
        jobs = [{"job": job, "url": url} for job, url in fault.jobs]
        seen = ", ".join(job for job, _ in fault.jobs[:3]) + (f" and {len(fault.jobs) - 3} more" if len(fault.jobs) > 3 else "")
        cost = [(job, hours) for job, hours in (charges or {}).get(fault.host, [])] if costed[fault.host] == fault.kind else []
        lost = sum(hours for _, hours in cost) if cost else None
        if lost:
            seen += (f"; it has cost {lost:,.1f} GPU-hours of the jobs' time so far ("
                     + ", ".join(f"{job} {hours:,.1f}" for job, hours in cost[:3]) + ")")
        findings.append(Finding(
            key=f"{Kind.NODE_FAULT}:{fault.host}/{fault.kind}", kind=Kind.NODE_FAULT, severity=fault.severity,
            title=f"{fault.host}: {fault.kind_words}" + (f", seen by {len(jobs)} jobs" if len(jobs) > 1 else ""),
            detail=f"{fault.what}; seen by {seen}" if seen else fault.what, owner=f"node {fault.host}",
            url=reverse("vetting:node", args=[fault.host]), gpu_hours_lost=round(lost, 3) if lost else None,
            data={"host": fault.host, "fault": fault.kind, "jobs": jobs,
                  "since": fault.since.isoformat() if fault.since else None}))
    return findings


def _vetting_findings(faulty_hosts=frozenset()) -> list[Finding]:
    """Failing nodes (one item per node: its open recommendations merged, or its health state) and bad switches.
    A suspect node that only a switch's recommendation names is that switch's item, not one of its own; a node that
    only the telemetry's hardware faults raised is their item (``faulty_hosts``: the nodes with one) while they hold."""
    recommendations, nodes, failures = selectors.vetting_state()
    health = {node.host: node for node in nodes}
    by_node: dict[str, list] = {}
    findings = []
    for rec in recommendations:
        if rec.subject_kind != "switch":
            by_node.setdefault(rec.subject, []).append(rec)
    # One item per switch finding, with the nodes behind it listed (and their states) and one action for them all;
    # the nodes only it names have no item of their own (vetting.node_states.switch_rows decides, as on /vetting/triage/).
    switches, absorbed = switch_rows(
        [(rec.subject, rec.hosts, {"rec": rec}) for rec in recommendations if rec.subject_kind == "switch"],
        {host: node.state for host, node in health.items()}, own_findings=set(by_node))
    for row in switches:
        rec = row["rec"]
        hosts = [host for host, _ in row["nodes"]]
        findings.append(Finding(
            key=f"{Kind.BAD_SWITCH}:{rec.subject}", kind=Kind.BAD_SWITCH, severity=rec.severity,
            title=f"Switch {rec.subject}: {rec.get_action_display()} ({rec.rule.name}), {len(hosts)} node{'s' * (len(hosts) != 1)}",
            detail=rec.summary, owner=f"switch {rec.subject} ({len(hosts)} nodes)",
            url=reverse("vetting:index") + f"?switch={rec.subject}",
            data={"switch": rec.subject, "hosts": hosts, "nodes": [[host, state, STATE_WORDS.get(state, state)] for host, state in row["nodes"]],
                  "drainable": row["drainable"], "recommendation": rec.pk, "rule": rec.rule.slug}))
    absorbed |= {host for host, node in health.items() if host in faulty_hosts and host not in by_node
                 and node.state == "suspect" and (node.reason or "").startswith(TELEMETRY_REASON)}
    hosts = set(by_node) | {host for host in health if host not in absorbed}
    for host in sorted(hosts):
        recs, node = by_node.get(host, []), health.get(host)
        state = node.state if node else "healthy"
        critical = any(rec.severity == "critical" for rec in recs) or (node is not None and node.severity == "critical"
                                                                       and state not in NODE_SEVERITY)
        severity = "critical" if critical else NODE_SEVERITY.get(state, "warning")
        what = recs[0].rule.name if recs else (node.reason if node else "")
        repeat = failures.get(host, 0)
        detail = "; ".join([rec.summary for rec in recs] or ([node.reason] if node and node.reason else []))
        if repeat:
            detail = f"{repeat} failed vetting runs in 30 days; {detail}" if detail else f"{repeat} failed vetting runs in 30 days"
        findings.append(Finding(
            key=f"{Kind.FAILING_NODE}:{host}", kind=Kind.FAILING_NODE, severity=severity,
            title=f"{host}: {state.replace('_', ' ')}" + (f" ({what})" if recs else ""),
            detail=detail, owner=f"node {host}", url=reverse("vetting:node", args=[host]),
            data={"host": host, "node_state": state, "recommendations": [rec.pk for rec in recs],
                  "rules": [rec.rule.slug for rec in recs], "failures_30d": repeat,
                  "drain": state in ("healthy", "suspect", "drain_recommended", "returned")}))
    return findings


def _namespace_findings() -> list[Finding]:
    findings = []
    for request in selectors.namespace_requests_waiting():
        who = request.requested_by.get_username()
        findings.append(Finding(
            key=f"{Kind.NAMESPACE_REQUEST}:{request.pk}", kind=Kind.NAMESPACE_REQUEST, severity="warning",
            title=f"{request.number}: {request.get_kind_display()} {request.name} waits for approval",
            detail="; ".join(str(reason) for reason in request.needs_approval) or "waits for a person's approval",
            owner=f"{who} ({request.project.slurm_account})", url=reverse("namespaces:request", args=[request.pk]),
            data={"request": request.pk, "requester": who, "approvers": list(request.approvers)}))
    return findings


def _catalog_findings() -> list[Finding]:
    findings = []
    for incident in selectors.catalog_incidents_open():
        product = incident.product
        findings.append(Finding(
            key=f"{Kind.CATALOG_INCIDENT}:{product.name}/{incident.kind}", kind=Kind.CATALOG_INCIDENT, severity="warning",
            title=f"{product.name}: {incident.kind} target breached", detail=incident.message,
            owner=f"{product.owner_team} ({product.owner_contact})" if product.owner_contact else product.owner_team,
            url=reverse("catalog:product", args=[product.name]),
            data={"product": product.name, "check": incident.kind, "opened": incident.opened.isoformat()}))
    return findings


def triage_findings(now: datetime | None = None) -> list[Finding]:
    """Everything the sources say needs a person now."""
    now = now or timezone.now()
    charges: dict = {}
    jobs = _job_findings(now, charges)
    faults = _node_fault_findings(now, charges)
    return (jobs + faults + _vetting_findings({finding.data["host"] for finding in faults})
            + _namespace_findings() + _catalog_findings())


# --- the sync --------------------------------------------------------------------------------------
FACTS = ("kind", "title", "detail", "owner", "url", "gpu_hours_lost", "severity", "rank", "data")


@transaction.atomic
def triage_sync(now: datetime | None = None) -> dict:
    """Rebuild the inbox from the sources: upsert by key, resolve what cleared (unless muted), reopen what came
    back. Returns counts: found, created, updated, resolved, reopened."""
    now = now or timezone.now()
    findings = {finding.key: finding for finding in triage_findings(now)}
    existing = {item.key: item for item in TriageItem.objects.select_for_update().filter(
        Q(key__in=list(findings)) | Q(open_at_source=True) | Q(state=State.MUTED))}
    counts = {"found": len(findings), "created": 0, "updated": 0, "resolved": 0, "reopened": 0}
    created, changed = [], []
    for key, finding in findings.items():
        item = existing.get(key)
        if item is None:
            created.append(TriageItem(key=key, kind=finding.kind, title=finding.title, detail=finding.detail,
                                      owner=finding.owner, url=finding.url, gpu_hours_lost=finding.gpu_hours_lost,
                                      severity=finding.severity, rank=finding.rank, data=finding.data, job_id=finding.job_pk,
                                      state=State.NEW, first_seen=now, last_seen=now, open_at_source=True))
            continue
        _move(item, reconcile(state=item.state, was_open=item.open_at_source, holds=True, muted_until=item.muted_until, now=now),
              now, counts)
        for name in FACTS:
            setattr(item, name, getattr(finding, name))
        item.job_id, item.last_seen, item.open_at_source = finding.job_pk, now, True
        changed.append(item)
    for key, item in existing.items():
        if key in findings:
            continue
        _move(item, reconcile(state=item.state, was_open=item.open_at_source, holds=False, muted_until=item.muted_until,
                              now=now), now, counts)
        item.open_at_source = False
        changed.append(item)
    TriageItem.objects.bulk_create(created, batch_size=500)
    TriageItem.objects.bulk_update(changed, [*FACTS, "job", "last_seen", "open_at_source", "state", "note", "assignee",
                                             "acknowledged_at", "resolved_at", "muted_until", "updated"], batch_size=500)
    counts["created"], counts["updated"] = len(created), len(changed)
    return counts


def _move(item: TriageItem, move, now: datetime, counts: dict) -> None:
    if move.state == item.state:
        return
    if move.reopened:
        item.assignee, item.acknowledged_at, item.resolved_at, item.muted_until = None, None, None, None
        counts["reopened"] += 1
    if move.state == State.RESOLVED:
        item.resolved_at = now
        counts["resolved"] += 1
    item.state, item.note, item.updated = move.state, move.note, now


# --- what staff do ---------------------------------------------------------------------------------
def _locked(item: TriageItem) -> TriageItem:
    return TriageItem.objects.select_for_update().select_related("assignee").get(pk=item.pk)


def _staff(user):
    if user is None or not getattr(user, "is_staff", False) or not getattr(user, "is_active", True):
        raise TriageError("only active staff may be assigned an item", field="assignee")
    return user


@transaction.atomic
def triage_acknowledge(item: TriageItem, user, assignee=None, *, note: str = "") -> TriageItem:
    """Someone looks at it: acknowledged, assigned to ``assignee`` (default: ``user``)."""
    item = _locked(item)
    item.assignee = _staff(assignee or user)
    item.state, item.acknowledged_at, item.muted_until = State.ACKNOWLEDGED, timezone.now(), None
    item.note = note or f"acknowledged by {user.get_username()}"
    item.save()
    return item


@transaction.atomic
def triage_resolve(item: TriageItem, user, *, note: str = "") -> TriageItem:
    item = _locked(item)
    item.state, item.resolved_at, item.muted_until = State.RESOLVED, timezone.now(), None
    item.note = note or f"resolved by {user.get_username()}"
    item.save()
    return item


@transaction.atomic
def triage_mute(item: TriageItem, user, until: datetime, *, note: str = "") -> TriageItem:
    """Out of the inbox until ``until`` (a future time); it comes back as new then if its source still holds."""
    if until is None or timezone.is_naive(until):
        raise TriageError("give the time the mute ends, with its time zone", field="muted_until")
    if until <= timezone.now():
        raise TriageError("the mute must end in the future", field="muted_until")
    item = _locked(item)
    item.state, item.muted_until = State.MUTED, until
    item.note = note or f"muted by {user.get_username()} until {until:%Y-%m-%d %H:%M %Z}"
    item.save()
    return item


@transaction.atomic
def triage_reopen(item: TriageItem, user, *, note: str = "") -> TriageItem:
    item = _locked(item)
    item.state, item.assignee, item.acknowledged_at, item.resolved_at, item.muted_until = State.NEW, None, None, None, None
    item.note = note or f"reopened by {user.get_username()}"
    item.save()
    return item


def triage_update(item: TriageItem, user, *, state: str, assignee=None, muted_until=None, note: str = "") -> TriageItem:
    """The one entry of the API and the forms: move ``item`` to ``state``."""
    if state == State.ACKNOWLEDGED:
        return triage_acknowledge(item, user, assignee, note=note)
    if assignee is not None:
        raise TriageError("an assignee goes with state acknowledged", field="assignee")
    if state == State.RESOLVED:
        return triage_resolve(item, user, note=note)
    if state == State.MUTED:
        return triage_mute(item, user, muted_until, note=note)
    if state == State.NEW:
        return triage_reopen(item, user, note=note)
    raise TriageError(f"state {state!r} is not one of {', '.join(State.values)}")
