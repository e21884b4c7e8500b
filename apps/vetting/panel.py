"""The vetting panel of the job page, and what it tells the first screen.

``context(job, request)`` gives ``templates/vetting/_job_section.html`` the vetting of the job's nodes
*before its start* and their state *now*, each failing check with its evidence and whether this job is
affected; ``summary(job)`` gives the first screen a Fact ("Vetting: 128 of 128 nodes passed before
start") and a Finding per affected situation, each with one thing to do. The decisions are made in
``assessment.py`` (plain Python); this module only reads rows (a handful of aggregate queries, no files).
"""
from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from apps.core.numbers import clock, count
from apps.core.panels import Fact, Finding, PanelSummary

from .assessment import AFTER, BEFORE, DURING, START, WINDOW, assess, exclude_action
from .gpu_health import FAILED, job_words
from .selectors import job_gpu_health, job_preflight, job_vetting_rows

ANCHOR = "#panel-vetting"
PHASE_WORDS = {BEFORE: "before the start", START: "this allocation's vetting", DURING: "during the job", AFTER: "after the job ended"}
_CACHE = "_vetting_assessment"


def assessment(job):
    """The job's vetting (``assessment.JobVetting``), read once per job object; None without nodes."""
    if not job.node_list:
        return None
    cached = job.__dict__.get(_CACHE)
    if cached is None:
        now = timezone.now()
        ran = job.run_window(now, open_end=True)  # a job not started is judged as if it started now
        start, end = ran or (now, None)
        rows = job_vetting_rows(job, start=start, end=end, now=now, window=WINDOW)
        health = job_gpu_health(job, start=start, end=end or now) if ran else []
        cached = (assess(job.node_list, start=start, end=end, now=now,
                         latest_before=rows["latest_before"], bad=rows["bad"], states=rows["states"],
                         checked_since=rows["checked_since"] if ran else 0), rows["runs"], health)
        job.__dict__[_CACHE] = cached
    return cached


def context(job, request=None) -> dict:
    found = assessment(job)
    if found is None:
        return {"vetting": None}
    vetting, runs, health = found
    level, verdict = vetting.verdict()
    node_url = reverse("vetting:node", args=["HOSTNAME"])

    def failure_row(failure):
        return {"host": failure.host, "node_url": node_url.replace("HOSTNAME", failure.host), "check": failure.check.eval_name,
                "kind": failure.check.kind, "outcome": failure.check.outcome, "evidence": failure.evidence, "when": failure.when,
                "times": failure.times, "phase": failure.phase, "phase_words": PHASE_WORDS[failure.phase], "affects": failure.affects,
                "words": failure.words,
                "run_url": reverse("vetting:run", args=[failure.check.run_id]) if failure.check.run_id else None}

    return {"vetting": {
        "verdict": verdict, "level": level, "affected": vetting.affected, "running": vetting.running,
        "hosts": len(vetting.hosts), "start": clock(vetting.start, vetting.now),
        "end": clock(vetting.end, vetting.now) if vetting.end else None, "window_days": WINDOW.days,
        "before_words": vetting.before_words(), "passed_before": vetting.passed_before,
        "checked_before": len(vetting.checked_before), "unchecked_before": vetting.unchecked_before[:20],
        "unchecked_count": len(vetting.unchecked_before),
        "before_failures": [failure_row(f) for f in vetting.phase(BEFORE, START)],
        "now_words": vetting.now_words(), "checked_since": vetting.checked_since,
        "since_failures": [failure_row(f) for f in vetting.phase(DURING, AFTER)],
        "states": [{"host": s.host, "node_url": node_url.replace("HOSTNAME", s.host), "state": s.state, "state_words": s.state_words,
                    "since": clock(s.since, vetting.now), "reason": s.reason, "relation": s.relation, "affects": s.affects, "words": s.words}
                   for s in vetting.states],
        "runs": [{"url": reverse("vetting:run", args=[run.pk]), "name": f"{run.get_source_display()} run #{run.pk}",
                  "started": clock(run.started, vetting.now), "protocol": run.protocol_name or "no protocol named",
                  "passed": run.passed, "hosts": count(run.hosts, "node"), "failed": len(run.failed_hosts),
                  "failed_hosts": ", ".join(run.failed_hosts[:6]) + (" …" if len(run.failed_hosts) > 6 else "")} for run in runs],
        "history_url": reverse("vetting:index") + f"?job={job.job_id}",
        "preflight": job_preflight(job),
        # GPU-health counters that rose (or flags newly set) on its GPUs while it ran; [] says nothing
        "gpu_health": [{"host": c.host, "node_url": node_url.replace("HOSTNAME", c.host), "gpu": c.gpu, "field": c.field,
                        "name": c.name, "level": c.level, "before": c.before, "after": c.after, "rise": c.rise,
                        "what": c.what, "first_seen": clock(c.first_seen, vetting.now), "words": c.words} for c in health],
    }}


def summary(job) -> PanelSummary | None:
    found = assessment(job)
    if found is None:
        return None
    vetting, _, health = found
    total = len(vetting.hosts)
    findings = []
    serious = [c for c in health if c.level != "noted"]
    if serious:
        level = "critical" if any(c.level == FAILED for c in serious) else "warning"
        hosts = list(dict.fromkeys(c.host for c in serious))
        findings.append(Finding(level, f"GPU health counters rose while this job {'runs' if vetting.running else 'ran'}: "
                                + job_words(serious), exclude_action(hosts), ANCHOR, "vetting"))
    noted = [c for c in health if c.level == "noted"]
    if noted:
        findings.append(Finding("info", "GPU health counters changed during the job (no action by themselves): " + job_words(noted),
                                "", ANCHOR, "vetting"))
    during = vetting.phase(DURING)
    if during:
        findings.append(Finding("critical", _title(during, "while this job " + ("runs" if vetting.running else "ran")),
                                exclude_action(f.host for f in during), ANCHOR, "vetting"))
    before = vetting.phase(BEFORE, START)
    if before:
        findings.append(Finding("warning", _title(before, "before this job started"), exclude_action(f.host for f in before),
                                ANCHOR, "vetting"))
    covered = {f.host for f in vetting.affecting}
    states = [s for s in vetting.affecting_states if s.host not in covered]
    if states:
        title = states[0].words if len(states) == 1 else f"{len(states):,} of this job's nodes are out of service: " + "; ".join(
            s.words for s in states[:3]) + (" …" if len(states) > 3 else "")
        findings.append(Finding("warning", title, exclude_action(s.host for s in states), ANCHOR, "vetting"))

    if not vetting.checked_before:
        fact = Fact("Vetting", "no check before start", f"none of its {count(total, 'node')} in the week before", "info", "fact-vetting")
    else:
        level = "warning" if vetting.failed_before or vetting.affecting_states else ("ok" if not vetting.unchecked_before else "info")
        detail = [f"{len(vetting.unchecked_before):,} not checked"] if vetting.unchecked_before else []
        if vetting.failed_before:
            detail.append("failed: " + ", ".join(vetting.failed_before[:3]) + (" …" if len(vetting.failed_before) > 3 else ""))
        detail.append(_now_detail(vetting))
        fact = Fact("Vetting", f"{vetting.passed_before:,} of {count(total, 'node')} passed before start", "; ".join(detail),
                    "critical" if during else level, "fact-vetting")
    facts = [fact]
    preflight = job_preflight(job)
    cached = preflight.get("page_cache_in_gpu") or []
    if cached:  # issue 39: what the job's GPUs held before it ran, named where the pre-flight is
        facts.append(Fact("Page cache in GPU memory", f"{len(cached):,} GPU{'s' if len(cached) != 1 else ''} before start",
                          "; ".join(item["sentence"] for item in cached[:3]) + (" …" if len(cached) > 3 else ""),
                          "warning", "fact-page-cache"))
    if preflight["checked"]:
        failed = [f["host"] for f in preflight["failed"]]
        facts.append(Fact("Pre-flight", f"{len(preflight['passed']):,} of {count(preflight['nodes'], 'node')} passed",
                          ("failed: " + ", ".join(failed[:4]) + (" …" if len(failed) > 4 else "")) if failed else
                          (f"{len(preflight['not_checked']):,} not checked" if preflight["not_checked"] else "every node checked"),
                          "warning" if failed else "ok", "fact-preflight"))
        for item in preflight["failed"]:
            findings.append(Finding("warning", f"{item['host']} failed the pre-flight: "
                                    + "; ".join(c["message"] for c in item["checks"]),
                                    exclude_action([item["host"]]), ANCHOR, "vetting"))
    return PanelSummary(facts=facts, findings=findings, data={"preflight": preflight})


def _title(failures, when: str) -> str:
    hosts = sorted({f.host for f in failures})
    if len(hosts) == 1:
        first = failures[0]
        checks = list(dict.fromkeys(f.check.eval_name for f in failures))
        return f"{hosts[0]} failed {', '.join(repr(c) for c in checks)} {when} ({first.evidence}; {first.when})"
    listed = ", ".join(f"{f.host} ({f.check.eval_name})" for f in failures[:4]) + (" …" if len(failures) > 4 else "")
    return f"{len(hosts):,} of this job's nodes failed a check {when}: {listed}"


def _now_detail(vetting) -> str:
    bad = [s for s in vetting.states if s.state != "returned"]
    if not bad:
        return "now: all healthy"
    first = bad[0]
    more = f" and {len(bad) - 1:,} more" if len(bad) > 1 else ""
    tail = "" if first.affects else (" (after the job: not affecting it)" if first.relation == AFTER else "")
    return f"now: {first.host} {first.state_words}{more}{tail}"
