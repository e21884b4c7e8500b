"""The rules catalogue: which histories make a node (or a switch) a repeat offender.

A rule is data — a kind, its parameters, the action it recommends and a severity — so staff edit
rules without code. Kinds:

``failures_in_window``
    A node with at least ``min_failures`` failed evaluations (fail or critical; one per run and
    evaluation, however many ranks reported it) in the last ``days``, optionally only evaluations
    whose type or name contains one of ``evals``, and only from ``kinds`` (vetnode, dcgm_diag, health).
    E.g. "≥ 3 failed GPU evaluations in 7 days → drain recommended".

``low_bandwidth_same_switch``
    A switch where, in each of the last ``consecutive`` runs of a bandwidth evaluation (``evals``,
    e.g. NcclLibEval) that touched it, at least ``min_nodes`` of the nodes behind it measured less
    than ``min_gbs`` (as vetnode reports it, decimal GB/s). Not one bad NIC: the switch or its links.
    E.g. "NCCL bandwidth below threshold in 2 consecutive runs behind the same switch → suspect switch".

``critical_result``
    Any result with outcome *critical* (a health check's CRITICAL, or a failure of an evaluation
    listed in ``evals``) in the last ``days``: exclude the node now.

``version_drift``
    A node whose current version of one of ``keys`` (driver, vbios, ... : apps/telemetry/versions.py) differs from
    the majority of its partition, in a partition of at least ``min_nodes`` nodes with a known value. Reads the
    version facts (``evaluate(..., versions=)``: one row per host with host, partition, key, value), not the
    results history. E.g. "a node on driver 550.54 in a partition on 560.35 → suspect".

``evaluate`` turns a history (one row per result) into findings; the same history always gives the
same findings, so evaluating again changes nothing (the portal keeps one open recommendation per
rule and subject). Plain Python: pandas, no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from .records import BAD_OUTCOMES, KINDS

ACTIONS = ("suspect", "drain_recommended", "exclude_now")
SEVERITIES = ("warning", "critical")
KIND_PARAMS = {
    "failures_in_window": {"min_failures": int, "days": float, "evals": list, "kinds": list},
    "low_bandwidth_same_switch": {"min_gbs": float, "consecutive": int, "min_nodes": int, "evals": list, "days": float},
    "critical_result": {"days": float, "evals": list, "kinds": list},
    "version_drift": {"keys": list, "min_nodes": int},
}
DEFAULTS = {
    "failures_in_window": {"min_failures": 3, "days": 7.0, "evals": [], "kinds": list(KINDS)},
    "low_bandwidth_same_switch": {"min_gbs": 15.0, "consecutive": 2, "min_nodes": 2, "evals": ["Nccl"], "days": 30.0},
    "critical_result": {"days": 1.0, "evals": [], "kinds": list(KINDS)},
    "version_drift": {"keys": ["driver", "cuda_driver", "vbios", "inforom_image"], "min_nodes": 4},
}
VERSION_COLUMNS = ("host", "partition", "key", "value", "seen")  # seen: when the node first had that value
HISTORY_COLUMNS = ("id", "time", "run_id", "host", "switch", "group", "kind", "eval_name", "eval_type", "outcome", "bandwidth_gbs")


@dataclass(frozen=True)
class RuleSpec:
    slug: str
    name: str
    kind: str
    params: dict
    action: str
    severity: str = "warning"
    version: int = 1
    enabled: bool = True


@dataclass
class Finding:
    rule: str  # slug
    rule_version: int
    subject_kind: str  # node or switch
    subject: str
    hosts: list[str]
    action: str
    severity: str
    summary: str
    evidence: list[int] = field(default_factory=list)  # result ids, newest first
    latest: datetime | None = None  # newest evidence
    evals: list[str] = field(default_factory=list)  # the evaluations the finding is about

    @property
    def key(self) -> tuple[str, str, str]:
        return self.rule, self.subject_kind, self.subject


# The largest value a numeric parameter may take: a window beyond ten years reaches before any vetting
# record (and past 292 years past what a timestamp holds), and no count or bandwidth comes near a million.
PARAM_MAXIMUM = {"days": 3650}
PARAM_MAXIMUM_DEFAULT = 1_000_000


def check_rule(kind: str, params: dict, action: str, severity: str) -> tuple[dict, list[tuple[str, str]]]:
    """Parameters with defaults filled in, and problems as (field, message). Anything may come in (a rule
    stored by an older version, a request body): every problem is named, nothing raises."""
    problems = []
    if not isinstance(kind, str) or kind not in KIND_PARAMS:
        problems.append(("kind", f"unknown rule kind {kind!r}; choose {', '.join(KIND_PARAMS)}"))
    if not isinstance(action, str) or action not in ACTIONS:
        problems.append(("action", f"choose one of {', '.join(ACTIONS)}"))
    if not isinstance(severity, str) or severity not in SEVERITIES:
        problems.append(("severity", f"choose one of {', '.join(SEVERITIES)}"))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return {}, problems + [("params", f"parameters are a JSON object, not {_json_type(params)}")]
    if problems and problems[0][0] == "kind":
        return dict(params), problems  # which parameters apply depends on the kind
    merged = {**DEFAULTS[kind], **params}
    for name, value in params.items():
        expected = KIND_PARAMS[kind].get(name)
        if expected is None:
            problems.append((f"params.{name}", f"{kind} has no parameter {name}; it takes {', '.join(KIND_PARAMS[kind])}"))
        elif expected is list:
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                problems.append((f"params.{name}", "a list of non-empty strings"))
            elif name == "kinds" and not set(value) <= set(KINDS):
                problems.append((f"params.{name}", f"kinds are {', '.join(KINDS)}"))
        elif (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
              or (expected is int and int(value) != value)):
            problems.append((f"params.{name}", f"a {'whole ' if expected is int else ''}number"))
        elif value <= 0:
            problems.append((f"params.{name}", "must be more than 0"))
        elif value > (maximum := PARAM_MAXIMUM.get(name, PARAM_MAXIMUM_DEFAULT)):
            problems.append((f"params.{name}", f"must be at most {maximum:,}"))
    return merged, problems


def _json_type(value) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


def empty_history() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in HISTORY_COLUMNS})


def _matches(frame: pd.DataFrame, evals: list[str]) -> pd.Series:
    if not evals:
        return pd.Series(True, index=frame.index)
    text = (frame["eval_type"].fillna("") + " " + frame["eval_name"].fillna("")).str.lower()
    mask = pd.Series(False, index=frame.index)
    for pattern in evals:
        mask |= text.str.contains(pattern.lower(), regex=False)
    return mask


def evaluate(rules: list[RuleSpec], history: pd.DataFrame, *, now: datetime, versions: pd.DataFrame | None = None) -> list[Finding]:
    """Findings of every enabled rule over ``history`` (columns ``HISTORY_COLUMNS``; ``time`` UTC) and, for
    ``version_drift``, the nodes' current ``versions`` (columns ``VERSION_COLUMNS``)."""
    if not history.empty:
        history = history.assign(time=pd.to_datetime(history["time"], utc=True))
    findings = []
    for rule in rules:
        if not rule.enabled:
            continue
        params, problems = check_rule(rule.kind, rule.params, rule.action, rule.severity)
        if problems:
            continue  # an invalid rule is reported where it is edited, never half-applied
        if rule.kind == "version_drift":
            findings.extend(_version_drift(rule, params, versions, now))
            continue
        if history.empty:
            continue
        since = pd.Timestamp(now) - timedelta(days=float(params["days"]))
        window = history[(history["time"] >= since) & (history["time"] <= pd.Timestamp(now))]
        window = window[window["kind"].isin(params.get("kinds", KINDS))] if "kinds" in params else window
        window = window[_matches(window, params.get("evals", []))]
        if window.empty:
            continue
        findings.extend(_KINDS[rule.kind](rule, params, window))
    return _explained_by_switches(findings)


def _explained_by_switches(findings: list[Finding]) -> list[Finding]:
    """Drop node findings whose failures are all evaluations that a switch finding already blames on
    the switch the node sits behind: one problem, one recommendation."""
    covered: dict[str, set[str]] = {}
    for finding in findings:
        if finding.subject_kind == "switch":
            for host in finding.hosts:
                covered.setdefault(host, set()).update(finding.evals)
    return [f for f in findings if not (f.subject_kind == "node" and f.evals and set(f.evals) <= covered.get(f.subject, set()))]


def _finding(rule, subject_kind, subject, hosts, summary, rows: pd.DataFrame) -> Finding:
    rows = rows.sort_values(["time", "id"], ascending=False)
    return Finding(rule=rule.slug, rule_version=rule.version, subject_kind=subject_kind, subject=str(subject), hosts=sorted(hosts),
                   action=rule.action, severity=rule.severity, summary=summary,
                   evidence=[int(i) for i in rows["id"].head(100)], latest=rows["time"].iloc[0].to_pydatetime(),
                   evals=sorted(rows["eval_name"].unique()))


def _failures_in_window(rule, params, window) -> list[Finding]:
    bad = window[window["outcome"].isin(BAD_OUTCOMES)]
    if bad.empty:
        return []
    distinct = bad.drop_duplicates(["host", "run_id", "eval_name"])
    out = []
    for host, rows in distinct.groupby("host", sort=True):
        if len(rows) < params["min_failures"]:
            continue
        evals = ", ".join(sorted(rows["eval_name"].unique())[:4])
        summary = (f"{host}: {len(rows)} failed evaluations in {params['days']:g} days ({evals}); "
                   f"the rule asks for {params['min_failures']}")
        out.append(_finding(rule, "node", host, [host], summary, bad[bad["host"] == host]))
    return out


def _low_bandwidth_same_switch(rule, params, window) -> list[Finding]:
    measured = window.dropna(subset=["switch"])
    measured = measured[np.isfinite(pd.to_numeric(measured["bandwidth_gbs"], errors="coerce").astype(float))]
    if measured.empty:
        return []
    measured = measured.assign(bandwidth_gbs=measured["bandwidth_gbs"].astype(float))
    per_node = measured.groupby(["switch", "run_id", "host"], sort=False).agg(
        gbs=("bandwidth_gbs", "min"), time=("time", "max")).reset_index()
    out = []
    for switch, rows in per_node.groupby("switch", sort=True):
        runs = rows.groupby("run_id")["time"].max().sort_values(ascending=False)
        if len(runs) < params["consecutive"]:
            continue
        last = runs.index[: params["consecutive"]]
        low_by_run = {run: rows[(rows["run_id"] == run) & (rows["gbs"] < params["min_gbs"])] for run in last}
        if not all(len(low) >= params["min_nodes"] for low in low_by_run.values()):
            continue
        hosts = sorted({host for low in low_by_run.values() for host in low["host"]})
        worst = min(float(low["gbs"].min()) for low in low_by_run.values())
        summary = (f"switch {switch}: in each of its last {params['consecutive']} bandwidth runs at least {params['min_nodes']} "
                   f"nodes measured below {params['min_gbs']:g} GB/s (lowest {worst:.2f} GB/s; {', '.join(hosts[:6])}"
                   f"{'…' if len(hosts) > 6 else ''}): suspect the switch or its links, not one node")
        evidence = measured[measured["run_id"].isin(last) & measured["host"].isin(hosts) & (measured["switch"] == switch)
                            & (measured["bandwidth_gbs"] < params["min_gbs"])]
        out.append(_finding(rule, "switch", switch, hosts, summary, evidence))
    return out


def _critical_result(rule, params, window) -> list[Finding]:
    explicit = bool(params.get("evals"))
    bad = window[(window["outcome"] == "critical") | (explicit & (window["outcome"] == "fail"))]
    out = []
    for host, rows in bad.groupby("host", sort=True):
        latest = rows.sort_values("time").iloc[-1]
        summary = f"{host}: {latest['eval_name']} was {latest['outcome']} at {latest['time']:%Y-%m-%d %H:%M} UTC: exclude it now"
        out.append(_finding(rule, "node", host, [host], summary, rows))
    return out


def _version_drift(rule, params, versions: pd.DataFrame | None, now) -> list[Finding]:
    if versions is None or versions.empty:
        return []
    out = []
    for key in params["keys"]:
        rows = versions[(versions["key"] == key) & (versions["partition"].fillna("") != "")]
        for partition, part in rows.groupby("partition", sort=True):
            values = dict(zip(part["host"], part["value"]))
            seen = dict(zip(part["host"], part["seen"])) if "seen" in part.columns else {}
            if len(values) < params["min_nodes"]:
                continue
            counts = pd.Series(list(values.values())).value_counts()
            if len(counts) < 2:
                continue
            top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0]
            for host, value in sorted(values.items()):
                if value == top[0]:
                    continue
                summary = (f"{host} runs {key.replace('_', ' ')} {value} while {top[1]} of the {len(values)} nodes of partition "
                           f"{partition} run {top[0]}")
                out.append(Finding(rule=rule.slug, rule_version=rule.version, subject_kind="node", subject=host, hosts=[host],
                                   action=rule.action, severity=rule.severity, summary=summary, evidence=[],
                                   latest=pd.Timestamp(seen.get(host) or now).to_pydatetime(), evals=[f"version:{key}"]))
    return out


_KINDS = {"failures_in_window": _failures_in_window, "low_bandwidth_same_switch": _low_bandwidth_same_switch,
          "critical_result": _critical_result}

BUILT_IN_RULES = (
    RuleSpec("gpu-failures-7d", "Repeated GPU failures", "failures_in_window",
             {"min_failures": 3, "days": 7, "evals": ["GPUEval", "CUDAEval", "memory", "diagnostic", "pcie"]}, "drain_recommended"),
    RuleSpec("nccl-low-same-switch", "Low NCCL bandwidth behind one switch", "low_bandwidth_same_switch",
             {"min_gbs": 15.0, "consecutive": 2, "min_nodes": 2, "evals": ["Nccl"], "days": 30}, "suspect"),
    RuleSpec("critical-health", "A critical health check", "critical_result", {"days": 1, "kinds": ["health", "dcgm_diag"]},
             "exclude_now", "critical"),
    RuleSpec("vetting-failures-30d", "Failing vetting again and again", "failures_in_window",
             {"min_failures": 5, "days": 30, "kinds": ["vetnode"]}, "suspect"),
    RuleSpec("version-drift", "Versions off the partition's majority", "version_drift",
             {"keys": ["driver", "cuda_driver", "vbios", "inforom_image"], "min_nodes": 4}, "suspect"),
)
