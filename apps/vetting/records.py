"""Vetting runs and results as plain data, whatever tool produced them.

One vocabulary for every source: vetnode's ``EvalResult`` (status SUCCESS / FAILED / SKIPPED /
UNKNOWN, as names or as the enum numbers 1-4), DCGM diagnostics (Pass / Fail / Warn / Skip) and site
health checks (Nagios-style OK / WARN / CRITICAL / UNKNOWN, exit codes 0-3). Each result keeps the
source's own status and gets one ``outcome`` for queries and rules: pass, warn, fail, critical,
skipped or unknown. Parsers and the API produce :class:`Run`; the portal stores it.

Plain Python: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

OUTCOMES = ("pass", "warn", "fail", "critical", "skipped", "unknown")
BAD_OUTCOMES = ("fail", "critical")
KINDS = ("vetnode", "dcgm_diag", "health")
VETNODE_STATUS_NUMBERS = {1: "SUCCESS", 2: "FAILED", 3: "SKIPPED", 4: "UNKNOWN"}
HEALTH_EXIT_CODES = {0: "OK", 1: "WARN", 2: "CRITICAL", 3: "UNKNOWN"}
_OUTCOME_OF = {
    "success": "pass", "succeeded": "pass", "pass": "pass", "passed": "pass", "ok": "pass",
    "failed": "fail", "fail": "fail", "failure": "fail", "error": "fail",
    "skipped": "skipped", "skip": "skipped", "not run": "skipped",
    "unknown": "unknown",
    "warn": "warn", "warning": "warn",
    "critical": "critical", "crit": "critical",
}
_BANDWIDTH = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)B/s\s*$", re.IGNORECASE)
_SCALE = {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}


class ParseError(ValueError):
    """Input that cannot be read; ``problems`` are (line, column, message), 1-based, column may be None."""

    def __init__(self, problems: list[tuple[int | None, int | None, str]], what: str = "input"):
        self.problems = problems
        first = problems[0] if problems else (None, None, "unreadable")
        where = f"line {first[0]}" + (f", column {first[1]}" if first[1] else "") if first[0] else "the input"
        more = f" (and {len(problems) - 1} more problem{'s' * (len(problems) > 2)})" if len(problems) > 1 else ""
        super().__init__(f"{what}: {where}: {first[2]}{more}")


def outcome_of(status) -> str:
    """The outcome of a source's status: a vetnode name or number, a DCGM result, a health state or exit code."""
    if isinstance(status, bool):
        return "unknown"
    if isinstance(status, int):
        status = VETNODE_STATUS_NUMBERS.get(status, "UNKNOWN")
    return _OUTCOME_OF.get(str(status).strip().lower(), "unknown")


def bandwidth_gbs(value) -> float | None:
    """A bandwidth as vetnode reports it ("23.05 GB/s", decimal units) in GB/s; None when it is not one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _BANDWIDTH.match(str(value)) if value is not None else None
    if not match:
        return None
    return float(match.group(1)) * _SCALE[match.group(2).upper()]


@dataclass
class Result:
    host: str
    eval_name: str
    kind: str  # vetnode, dcgm_diag or health
    status: str  # the source's own word
    outcome: str  # one of OUTCOMES
    eval_type: str = ""
    rank: int | None = None
    local_rank: int | None = None
    gpu: int | None = None
    elapsed_s: float | None = None
    metrics: dict | list = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)
    message: str = ""
    line: int | None = None  # where in the uploaded text it came from

    @property
    def bandwidth_gbs(self) -> float | None:
        if isinstance(self.metrics, dict):
            return bandwidth_gbs(self.metrics.get("bandwidth"))
        return None


@dataclass
class Run:
    source: str  # vetnode, vetnode-legacy, dcgm-diag, json, health
    results: list[Result]
    protocol_name: str = ""
    protocol_hash: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    cluster: str | None = None
    job_id: int | None = None
    submitter: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted({result.host for result in self.results})

    @property
    def failed_hosts(self) -> list[str]:
        return sorted({result.host for result in self.results if result.outcome in BAD_OUTCOMES})
