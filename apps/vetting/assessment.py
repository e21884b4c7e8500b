"""How the vetting of a job's nodes bears on that job: before it started, now, and whether it is affected.

The job page used to list "failed a check in the week before and during the job" next to "not healthy
now" without saying which check, when, or whether the job itself was touched. This module keeps the
two apart and decides, per node:

* **before the start** — per node and check, the latest result in the week before the job started,
  and the results of this allocation's own vetting runs (``belvedere-vetnode.sh`` runs inside the job,
  so its results may carry a time just after the start; they still describe the nodes *as the job got
  them*). A check whose latest result failed → the job started on a failing node: it **affects** the job.
* **during the job** — a failed check between the start and the end (or now, while it runs), other than
  the allocation's own vetting → it **affects** the job (the most urgent case).
* **after the job ended** — a failed check, or a node state set later → **not affecting this job**.
* **node states** (suspect, drain recommended, drained, in repair) set before the start affect the job;
  set while it ran, a state that takes the node out (drain recommended, drained, in repair) does; set
  after it ended, none does.

Every sentence carries its evidence: the check's name, what it measured against its threshold where the
result says so, and when. Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping

from apps.core.numbers import clock, count, quantity

from .node_states import LEVEL, STATE_WORDS
from .protocol import EVAL_TYPES, parse_rate

WINDOW = timedelta(days=7)  # how far before the start a check still describes the node
BEFORE, START, DURING, AFTER = "before", "start", "during", "after"
PHASE_ORDER = {DURING: 0, START: 1, BEFORE: 2, AFTER: 3}
_WORST = {"critical": 0, "fail": 1}


@dataclass(frozen=True)
class CheckResult:
    """One stored result, as much of it as the job's vetting needs."""

    host: str
    time: datetime
    eval_name: str
    outcome: str
    kind: str = ""
    eval_type: str = ""
    status: str = ""
    gpu: int | None = None
    bandwidth_gbs: float | None = None
    metrics: Any = None
    thresholds: Any = None
    message: str = ""
    run_id: int | None = None
    own_run: bool = False  # from a vetting run of this job's allocation


@dataclass(frozen=True)
class NodeState:
    host: str
    state: str  # one of health.STATES
    since: datetime
    reason: str = ""


@dataclass(frozen=True)
class Failure:
    """A check that failed on one of the job's nodes, where it falls against the job, and what it means for it."""

    host: str
    check: CheckResult  # the worst result of the check on the node at that time (the first one, during the job)
    phase: str  # BEFORE, START, DURING or AFTER
    evidence: str  # what it measured against its threshold, in words
    affects: bool
    when: str  # "11-22 18:46 UTC"
    words: str  # the sentence the panel shows
    times: int = 1  # how often it failed in this phase (repeated health checks during a job)


@dataclass(frozen=True)
class StateNow:
    host: str
    state: str
    state_words: str
    since: datetime
    reason: str
    relation: str  # BEFORE (set before the start), DURING, AFTER (set after the end)
    affects: bool
    words: str


@dataclass
class JobVetting:
    hosts: list[str]
    start: datetime
    end: datetime | None
    now: datetime
    checked_before: list[str] = field(default_factory=list)  # nodes with a check in the week before the start
    failed_before: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)  # every phase, most urgent first
    checked_since: int = 0  # nodes checked again after the start (outside the allocation's own vetting)
    states: list[StateNow] = field(default_factory=list)  # nodes not healthy now

    @property
    def passed_before(self) -> int:
        return len(self.checked_before) - len(self.failed_before)

    @property
    def unchecked_before(self) -> list[str]:
        checked = set(self.checked_before)
        return [host for host in self.hosts if host not in checked]

    def phase(self, *phases: str) -> list[Failure]:
        return [failure for failure in self.failures if failure.phase in phases]

    @property
    def affecting(self) -> list[Failure]:
        return [failure for failure in self.failures if failure.affects]

    @property
    def affecting_states(self) -> list[StateNow]:
        return [state for state in self.states if state.affects]

    @property
    def affected(self) -> bool:
        return bool(self.affecting or self.affecting_states)

    @property
    def running(self) -> bool:
        return self.end is None

    def before_words(self) -> str:
        """"128 of 128 nodes passed their checks before the start" and the nodes without one."""
        total = len(self.hosts)
        if not self.checked_before:
            return f"None of its {count(total, 'node')} was checked in the week before it started."
        text = f"{len(self.checked_before) - len(self.failed_before):,} of {count(total, 'node')} passed their latest checks before the start"
        if self.failed_before:
            text += f"; {count(len(self.failed_before), 'node')} failed"
        unchecked = len(self.unchecked_before)
        if unchecked:
            text += f"; {count(unchecked, 'node')} had no check in the week before"
        return text + "."

    def now_words(self) -> str:
        """Where the nodes stand now, in one sentence."""
        bad = [state for state in self.states if state.state != "returned"]
        total = len(self.hosts)
        healthy = total - len(bad)
        if not bad:
            return f"All {count(total, 'node')} are healthy now." if total > 1 else "The node is healthy now."
        if total == 1:
            return f"The node is {bad[0].state_words} now."
        kinds: dict[str, int] = {}
        for state in bad:
            kinds[state.state_words] = kinds.get(state.state_words, 0) + 1
        parts = ", ".join(f"{number:,} {words}" for words, number in sorted(kinds.items(), key=lambda item: -item[1]))
        return f"{healthy:,} of {count(total, 'node')} are healthy now; {parts}."

    def verdict(self) -> tuple[str, str]:
        """(level, sentence) for the top of the panel: is this job affected, and by what."""
        during = [f for f in self.affecting if f.phase == DURING]
        if during:
            return "critical", f"Affects this job: while it {'runs' if self.running else 'ran'}, {_failed_words(during)}."
        before = [f for f in self.affecting if f.phase in (BEFORE, START)]
        if before:
            return "warning", f"Affects this job: it started on failing nodes: {_failed_words(before)}."
        states = self.affecting_states
        if states:
            return "warning", "Affects this job: " + "; ".join(state.words for state in states[:3]) + "."
        if not self.checked_before and not self.checked_since:
            return "info", "No vetting of this job's nodes: nothing is known about them either way."
        later = self.phase(AFTER) or [state for state in self.states if state.relation == AFTER]
        tail = " Later findings on its nodes do not affect it." if later else ""
        return "ok", f"Nothing found that affects this job.{tail}"


def assess(hosts: Iterable[str], *, start: datetime, end: datetime | None, now: datetime,
           latest_before: Mapping[tuple[str, str], datetime], bad: Iterable[CheckResult],
           states: Iterable[NodeState] = (), checked_since: int = 0) -> JobVetting:
    """The job's vetting from its rows.

    ``latest_before`` maps (host, check name) to the time of the latest result of that check on that node
    in the week before ``start`` or in this allocation's own runs; ``bad`` holds the failed (fail or
    critical) results on the job's nodes from a week before the start until now; ``states`` the nodes'
    health states that are not plain healthy."""
    hosts = list(dict.fromkeys(hosts))
    wanted = set(hosts)
    result = JobVetting(hosts=hosts, start=start, end=end, now=now, checked_since=checked_since)
    result.checked_before = sorted({host for host, _ in latest_before if host in wanted})
    until = end or now

    worst: dict[tuple[str, str, datetime], CheckResult] = {}
    during: dict[tuple[str, str], list[CheckResult]] = {}
    after: dict[tuple[str, str], list[CheckResult]] = {}
    for check in bad:
        if check.host not in wanted or check.outcome not in _WORST:
            continue
        if check.own_run or check.time <= start:
            if latest_before.get((check.host, check.eval_name)) != check.time:
                continue  # a later result of the same check replaced it
            key = (check.host, check.eval_name, check.time)
            if key not in worst or _WORST[check.outcome] < _WORST[worst[key].outcome]:
                worst[key] = check
        elif check.time <= until:
            during.setdefault((check.host, check.eval_name), []).append(check)
        else:
            after.setdefault((check.host, check.eval_name), []).append(check)

    failures = []
    for (host, _, moment), check in worst.items():
        phase = START if check.own_run else BEFORE
        when = clock(moment, now)
        what = "this allocation's vetting" if phase == START else "the week before this job started"
        failures.append(Failure(host, check, phase, evidence(check), True, when,
                                f"{host} failed {check.eval_name!r} in {what} ({when}): the job started on a failing node"))
    for (host, name), checks in during.items():
        checks.sort(key=lambda c: (c.time, _WORST[c.outcome]))
        first = checks[0]
        when = clock(first.time, now)
        again = f", {len(checks)} times" if len(checks) > 1 else ""
        failures.append(Failure(host, first, DURING, evidence(first), True, when,
                                f"{host} failed {name!r} at {when}{again}, while this job "
                                f"{'runs' if end is None else 'ran'} on it", times=len(checks)))
    for (host, name), checks in after.items():
        checks.sort(key=lambda c: (c.time, _WORST[c.outcome]))
        first = checks[0]
        when = clock(first.time, now)
        failures.append(Failure(host, first, AFTER, evidence(first), False, when,
                                f"{host} failed {name!r} at {when}, after this job ended at {clock(end, now)}: "
                                f"not affecting this job", times=len(checks)))
    failures.sort(key=lambda f: (PHASE_ORDER[f.phase], f.host, f.check.time, f.check.eval_name))
    result.failures = failures
    result.failed_before = sorted({f.host for f in failures if f.phase in (BEFORE, START)})

    for state in sorted(states, key=lambda s: (-LEVEL.get(s.state, 0), s.host)):
        if state.host not in wanted or state.state == "healthy":
            continue
        result.states.append(_state_now(state, start, end, now))
    return result


def _state_now(state: NodeState, start: datetime, end: datetime | None, now: datetime) -> StateNow:
    words = STATE_WORDS.get(state.state, state.state)
    since = clock(state.since, now)
    reason = f" ({state.reason})" if state.reason else ""
    if state.state == "returned":
        return StateNow(state.host, state.state, words, state.since, state.reason, AFTER if end and state.since > end else DURING,
                        False, f"{state.host} was returned to service at {since}")
    if state.since <= start:
        return StateNow(state.host, state.state, words, state.since, state.reason, BEFORE, True,
                        f"{state.host} was already {words} when this job started (since {since}){reason}")
    if end is None or state.since <= end:
        takes_out = LEVEL.get(state.state, 0) >= 2
        tail = "" if takes_out else ": the job keeps running on it"
        return StateNow(state.host, state.state, words, state.since, state.reason, DURING, takes_out,
                        f"{state.host} was marked {words} at {since}, while this job {'runs' if end is None else 'ran'} on it{reason}{tail}")
    return StateNow(state.host, state.state, words, state.since, state.reason, AFTER, False,
                    f"{state.host} was marked {words} at {since}, after this job ended at {clock(end, now)}: not affecting this job")


def evidence(check: CheckResult) -> str:
    """What the check measured against its threshold, in words, as far as the result says.

    Bandwidth checks (NCCL/RCCL): the measured GB/s against ``min_bandwidth`` (the result's own threshold,
    else vetnode's default), read as vetnode reads it (binary GB). GPU checks: the hottest GPU and the
    fullest memory against ``max_temp``/``max_used_memory`` where known. Otherwise the source's message."""
    thresholds = check.thresholds if isinstance(check.thresholds, dict) else {}
    metrics = check.metrics if isinstance(check.metrics, dict) else {}
    parts = []
    if check.bandwidth_gbs is not None:
        written = thresholds.get("min_bandwidth")
        source = "min_bandwidth"
        if written is None:
            spec = EVAL_TYPES.get(check.eval_type)
            param = spec.params.get("min_bandwidth") if spec else None
            written = param.default if param is not None else None
            source = "vetnode's default min_bandwidth"
        rate = parse_rate(written) if isinstance(written, str) else (float(written) * 1e9 if _number(written) else None)
        text = f"{quantity(check.bandwidth_gbs, 'GB/s')} measured"
        if rate:
            # vetnode reads "15 GB/s" as 15 x 2^30 B/s and reports decimal GB/s: say the threshold as reported
            text += f", threshold {quantity(rate / 1e9, 'GB/s')}" + (f" ({source} {written})" if isinstance(written, str) else "")
        parts.append(text)
    gpus = metrics.get("gpus")
    if isinstance(gpus, list) and gpus:
        temps = [(index, gpu.get("temp")) for index, gpu in enumerate(gpus)
                 if isinstance(gpu, dict) and isinstance(gpu.get("temp"), (int, float)) and not isinstance(gpu.get("temp"), bool)]
        if temps:
            index, hottest = max(temps, key=lambda item: item[1])
            limit = thresholds.get("max_temp")
            text = f"GPU {index} at {quantity(hottest, '°C')}"
            if isinstance(limit, (int, float)) and not isinstance(limit, bool):
                text += f", limit {quantity(limit, '°C')}"
            elif len(temps) > 1:
                others = sorted(t for i, t in temps if i != index)
                text += f" (the others {quantity(others[0], '°C')}–{quantity(others[-1], '°C')})" if others[0] != others[-1] \
                    else f" (the others {quantity(others[0], '°C')})"
            parts.append(text)
        used = [(index, gpu.get("memory_used") / gpu.get("memory_total")) for index, gpu in enumerate(gpus)
                if isinstance(gpu, dict) and _number(gpu.get("memory_used")) and _number(gpu.get("memory_total")) and gpu["memory_total"] > 0]
        limit = thresholds.get("max_used_memory")
        if used and _number(limit):
            index, fullest = max(used, key=lambda item: item[1])
            if fullest > limit:
                parts.append(f"GPU {index} memory {quantity(fullest, '%')} in use, limit {quantity(limit, '%')}")
    message = (check.message or (metrics.get("error") if isinstance(metrics.get("error"), str) else "") or "").strip()
    if message:
        prefix = f"GPU {check.gpu}: " if check.gpu is not None and "GPU" not in message else ""
        parts.append(prefix + (message if len(message) <= 200 else message[:199] + "…"))
    if not parts:
        parts.append(f"status {check.status or check.outcome}" + (f" on GPU {check.gpu}" if check.gpu is not None else ""))
    return "; ".join(parts)


def exclude_action(hosts: Iterable[str]) -> str:
    """"Resubmit excluding nid001234 (--exclude=nid001234)", hostlist-compressed for many nodes."""
    hosts = sorted(set(hosts))
    try:
        import hostlist

        expression = hostlist.collect_hostlist(hosts)
    except Exception:  # noqa: BLE001 - a name hostlist cannot compress: list them plainly
        expression = ",".join(hosts)
    return f"Resubmit excluding {expression} (--exclude={expression})"


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _failed_words(failures: list[Failure]) -> str:
    """"nid000561 failed 'nccl internode'; 5 nodes failed 'gpu idle' (nid000001, … and 1 more)", per check."""
    by_check: dict[str, list[str]] = {}
    for failure in failures:
        hosts = by_check.setdefault(failure.check.eval_name, [])
        if failure.host not in hosts:
            hosts.append(failure.host)
    parts = []
    for name, hosts in list(by_check.items())[:3]:
        if len(hosts) == 1:
            parts.append(f"{hosts[0]} failed {name!r}")
        else:
            shown = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4:,} more" if len(hosts) > 4 else "")
            parts.append(f"{len(hosts):,} nodes failed {name!r} ({shown})")
    more = len(by_check) - 3
    return "; ".join(parts) + (f"; and {more:,} more check{'s' * (more > 1)}" if more > 0 else "")
