"""The staff triage inbox's rules: what an item is (a finding from one source), where it ranks, how a sync
moves its state, and the message prepared for a wasteful job's user.

* **Ranking** (lower ``rank`` first): wasteful running jobs first, by GPU-hours lost (most first); then the
  rest by severity (critical, warning, info) and by how long they have waited (oldest first).
* **A sync** (``reconcile``) never undoes what a person decided while the problem holds: an item whose
  source still holds keeps its state (new, acknowledged, resolved by hand, muted); a mute that ran out makes
  it new again. An item whose source cleared is resolved with a note, unless muted (a mute is kept until it
  runs out). A resolved item whose source had cleared and now holds again comes back as new.
* **The prepared message** names the job, the GPU-hours lost and what to do.

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote

KINDS = ("wasteful_job", "straggler", "failing_node", "node_fault", "bad_switch", "namespace_request", "catalog_incident")
STATES = ("new", "acknowledged", "resolved", "muted")
OPEN_STATES = ("new", "acknowledged")  # what the inbox shows by default: it needs a person
SEVERITIES = ("critical", "warning", "info")
WASTE_RANK = 0  # every wasteful job ranks above every other item
SEVERITY_RANK = {"critical": 1, "warning": 2, "info": 3}

CLEARED_NOTE = "cleared at source"
CAME_BACK_NOTE = "came back at source"
MUTE_ENDED_NOTE = "mute ended, still open at source"


@dataclass
class Finding:
    """One thing a source says needs a person, under a stable key (``<kind>:<subject>``)."""

    key: str
    kind: str
    title: str
    owner: str
    severity: str = "warning"
    detail: str = ""
    url: str = ""
    gpu_hours_lost: float | None = None
    job_pk: int | None = None
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")
        if not self.key.startswith(f"{self.kind}:"):
            raise ValueError(f"key {self.key!r} must start with {self.kind}:")

    @property
    def rank(self) -> int:
        return rank_of(self.kind, self.severity)


def rank_of(kind: str, severity: str) -> int:
    """The item's tier: wasteful jobs first (then by GPU-hours lost), the others by severity."""
    return WASTE_RANK if kind == "wasteful_job" else SEVERITY_RANK.get(severity, max(SEVERITY_RANK.values()))


def sort_key(rank: int, gpu_hours_lost: float | None, first_seen: datetime):
    """Order of the ranked list: tier, then most GPU-hours lost, then the longest waiting."""
    return (rank, -(gpu_hours_lost or 0.0), first_seen)


@dataclass(frozen=True)
class Move:
    state: str
    note: str = ""  # why the sync moved it ("" when it did not)
    reopened: bool = False  # the acknowledgement and resolution are cleared


def reconcile(*, state: str, was_open: bool, holds: bool, muted_until: datetime | None, now: datetime) -> Move:
    """Where a sync moves an item: ``was_open`` whether its source held at the last sync, ``holds`` now."""
    if state not in STATES:
        raise ValueError(f"state {state!r} is not one of {', '.join(STATES)}")
    mute_over = state == "muted" and (muted_until is None or muted_until <= now)
    if holds:
        if mute_over:
            return Move("new", MUTE_ENDED_NOTE, reopened=True)
        if state == "resolved" and not was_open:
            return Move("new", CAME_BACK_NOTE, reopened=True)
        return Move(state)
    if state == "muted" and not mute_over:
        return Move(state)
    if state == "resolved":
        return Move(state)
    return Move("resolved", CLEARED_NOTE)


def hours_words(hours: float) -> str:
    return f"{hours:,.0f}" if hours >= 10 else f"{hours:,.1f}"


def waste_advice(*, gpus: int, idle_gpus: int, score: float | None, limiter: str = "") -> str:
    """What the user can do, from why the job is wasteful."""
    if gpus and idle_gpus:
        return (f"{idle_gpus} of the job's {gpus} GPUs sat idle. If the job does not need them, ask for fewer "
                "(--gpus-per-node / --gpus) or run this step on a CPU partition; if it should use them, check that "
                "every rank gets a GPU (CUDA_VISIBLE_DEVICES, --gpus-per-task).")
    where = f" (limited by {limiter})" if limiter else ""
    scored = f"{score:.0f} %" if score is not None else "low"
    return (f"The GPUs are only {scored} saturated{where}. The job page's saturation panel shows what holds them "
            "back: larger micro-batches, fewer GPUs for the same work, or overlapping data loading usually help.")


def prepared_mail(*, job_label: str, job_name: str, url: str, lost: float, hours: float, gpus: int, idle_gpus: int,
                  score: float | None, limiter: str = "", staff_name: str = "") -> tuple[str, str]:
    """Subject and body of the message to a wasteful job's user."""
    subject = f"Your job {job_label} ({job_name}) lost {hours_words(lost)} GPU-hours" if job_name else \
        f"Your job {job_label} lost {hours_words(lost)} GPU-hours"
    score_words = f"a saturation score of {score:.0f} / 100" if score is not None else "no saturation score yet"
    body = (f"Hello,\n\nyour running job {job_label}{f' ({job_name})' if job_name else ''} holds {gpus} GPUs and has "
            f"lost about {hours_words(lost)} GPU-hours in {hours_words(hours)} hours: {score_words}"
            f"{f', {idle_gpus} GPUs idle' if idle_gpus else ''}.\n\n"
            f"{waste_advice(gpus=gpus, idle_gpus=idle_gpus, score=score, limiter=limiter)}\n\n"
            f"The job's page: {url}\n\nBest regards,\n{staff_name or 'the platform team'}\n")
    return subject, body


def mailto(address: str, subject: str, body: str) -> str:
    """A mailto: link with the subject and body prepared (RFC 6068: percent-encoded, CRLF line ends)."""
    return (f"mailto:{quote(address or '', safe='@')}?subject={quote(subject, safe='')}"
            f"&body={quote(body.replace(chr(10), chr(13) + chr(10)), safe='')}")


def group_arrays(findings: list[Finding], arrays: dict[str, str]) -> list[Finding]:
    """One finding per job array and kind instead of one per task (issue 35: 31 of 39 items were one array's tasks).

    ``arrays``: a task finding's key -> its array's label (``alps/1200123``); findings not in it pass unchanged. The
    array's finding is keyed ``<kind>:<array>_[]`` (stable while tasks come and go), counts its tasks, sums their
    GPU-hours lost (it ranks by what the whole array loses), takes the worst task's severity, link and facts (the
    prepared mail speaks of the array), names the worst task in its title and lists every task, worst first, in
    ``data["tasks"]``."""
    out, grouped = [], {}
    for finding in findings:
        array = arrays.get(finding.key)
        if not array:
            out.append(finding)
            continue
        grouped.setdefault((finding.kind, array), []).append(finding)
    for (kind, array), tasks in grouped.items():
        tasks.sort(key=lambda f: (SEVERITY_RANK[f.severity], -(f.gpu_hours_lost or 0.0), f.key))
        worst = tasks[0]
        losses = [f.gpu_hours_lost for f in tasks if f.gpu_hours_lost is not None]
        lost = round(sum(losses), 3) if losses else None
        count = len(tasks)
        rows = [{"job": f.data.get("task") or f.data.get("job") or f.key.partition(":")[2], "title": f.title, "detail": f.detail, "url": f.url,
                 "severity": f.severity, "gpu_hours_lost": f.gpu_hours_lost} for f in tasks]
        data = {**worst.data, "array": array, "task_count": count, "tasks": rows, "worst": rows[0]["job"]}
        if kind == "wasteful_job":
            data.update(job=f"{array}_[{count} task{'s' * (count != 1)}]",
                        gpus=sum(int(f.data.get("gpus") or 0) for f in tasks),
                        idle_gpus=sum(int(f.data.get("idle_gpus") or 0) for f in tasks),
                        hours=max(float(f.data.get("hours") or 0.0) for f in tasks))
            what = "waste GPUs" if count != 1 else "wastes GPUs"
            detail = f"{hours_words(lost or 0.0)} GPU-hours lost by {count} task{'s' * (count != 1)}; worst {rows[0]['job']}: {worst.detail}"
        else:
            what = (f"{'have' if count != 1 else 'has'} stragglers" if kind == "straggler"
                    else f"{'are' if count != 1 else 'is'} {kind.replace('_', ' ')}")
            detail = f"worst {rows[0]['job']}: {worst.detail}"
        name = worst.data.get("job_name") or ""
        title = f"Job array {array}{f' {name}' if name else ''}: {count} task{'s' * (count != 1)} {what} (worst {rows[0]['job']})"
        out.append(Finding(key=f"{kind}:{array}_[]", kind=kind, title=title, owner=worst.owner, severity=worst.severity,
                           detail=detail, url=worst.url, gpu_hours_lost=lost, job_pk=worst.job_pk, data=data))
    return out


def straggler_detail(findings: list[dict], *, shown: int = 3) -> str:
    """One line per finding (the detector's own reason), the first ``shown``, then how many more."""
    reasons = [str(item.get("reason") or item.get("host") or "straggler") for item in findings]
    more = len(reasons) - shown
    return "; ".join(reasons[:shown]) + (f"; and {more} more" if more > 0 else "")
