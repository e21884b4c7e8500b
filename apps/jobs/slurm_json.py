"""Read Slurm's JSON output (``squeue --json``, ``sacct --json``, ``scontrol show job --json``).

Pure: must not import django.

Slurm's JSON changes shape between plugin versions: 0.0.38 (Slurm 22.05) gives plain numbers,
strings and epoch seconds; 0.0.40 and later wrap numbers as ``{"set", "infinite", "number"}`` and
states as lists. The readers here accept both. One bad job never stops the others: each job is
normalised on its own, and the problems are returned beside the jobs that parsed.
"""
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

import hostlist

from apps.core.perf import gc_paused

JOB_STATES_ACTIVE = {"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT"}
JOB_STATES_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "ENDED"}
GPU_TRES = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
MAX_TEXT = 10_000


@dataclass(frozen=True)
class SlurmStep:
    step_id: str
    name: str = ""
    nodes: str = ""
    tasks: int | None = None
    state: str = ""
    start: datetime | None = None
    end: datetime | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class SlurmJob:
    """One job (or one array task, or one heterogeneous component) as Belvedere stores it."""

    cluster: str
    job_id: int
    state: str
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    state_reason: str = ""
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_task_string: str = ""
    het_job_id: int | None = None
    het_offset: int | None = None
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit_minutes: int | None = None
    nodes: str = ""
    node_list: tuple[str, ...] = ()
    node_count: int | None = None
    tasks: int | None = None
    gpus: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    working_directory: str = ""
    command: str = ""
    comment: str = ""
    environment: str = ""
    steps: tuple[SlurmStep, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ParseProblem:
    index: int | None
    job_id: int | None
    message: str

    def __str__(self) -> str:
        where = f"job {self.job_id}" if self.job_id is not None else (f"entry {self.index}" if self.index is not None else "document")
        return f"{where}: {self.message}"


@dataclass
class ParseResult:
    jobs: list[SlurmJob]
    problems: list[ParseProblem]
    slurm_version: str = ""
    plugin: str = ""


class SlurmJsonError(ValueError):
    """The document as a whole is unusable (not JSON, no ``jobs`` list)."""


# ---------------------------------------------------------------------------------------------
# Value helpers: every accessor tolerates the shapes of 0.0.38 and later.
# ---------------------------------------------------------------------------------------------
def number(value) -> int | None:
    """An integer from 5, "5", {"set": true, "number": 5}; None for unset/infinite/missing."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"expected a number, got {json.dumps(value)[:60]}")


def timestamp(value) -> datetime | None:
    seconds = number(value)
    if not seconds or seconds < 0:
        return None  # Slurm uses 0 for "not yet"
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def text(value, limit: int = 500) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):  # sacct wraps e.g. comment as {"job": ..., "administrator": ...}
        value = value.get("job") or ""
    if not isinstance(value, str):
        value = str(value)
    value = value[:limit]
    if value.isprintable():  # the usual case, checked in C
        return value
    # Job names and comments are user input: replace control characters (escape sequences,
    # newlines) so they cannot forge lines in logs or terminals.
    return "".join(character if character.isprintable() else " " for character in value)


def state_of(value) -> str:
    """RUNNING from "RUNNING", ["RUNNING", "COMPLETING"] or {"current": ["RUNNING"]}."""
    if isinstance(value, dict):
        value = value.get("current")
    if isinstance(value, list):
        value = value[0] if value else ""
    if not isinstance(value, str) or not value:
        raise ValueError(f"no job state in {json.dumps(value)[:60]}")
    return value.upper().split()[0].rstrip("+")


def expand_nodes(expression: str) -> tuple[str, ...]:
    expression = (expression or "").strip()
    if not expression or expression in {"None assigned", "(null)"}:
        return ()
    try:
        return tuple(hostlist.expand_hostlist(expression))
    except hostlist.BadHostlist as exc:
        raise ValueError(f"node list {expression[:80]!r} is not a hostlist expression ({exc})") from None


def gpus_from_tres(*tres_strings) -> int | None:
    for tres in tres_strings:
        if isinstance(tres, str):
            match = GPU_TRES.search(tres)
            if match:
                return int(match.group(1))
    return None


def exit_code_of(value) -> tuple[int | None, int | None]:
    """(return code, signal) from squeue's int/“{return_code, signal}” or sacct's objects."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        return_code = number(value.get("return_code"))
        signal = value.get("signal")
        signal = number(signal.get("id") if isinstance(signal, dict) else signal)
        return return_code, signal
    code = number(value)
    if code is None:
        return None, None
    # squeue 0.0.38 reports the raw wait status: high byte = exit code, low byte = signal.
    return code >> 8, (code & 0x7F) or None


def environment_of(command: str, comment: str) -> str:
    """The container environment (``--environment=NAME``) when the command line shows it."""
    for source in (command, comment):
        match = re.search(r"--environment[= ](\S+)", source or "")
        if match:
            return match.group(1)[:200]
    return ""


# ---------------------------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------------------------
def _document(raw: str | bytes) -> dict:
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SlurmJsonError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise SlurmJsonError("expected an object with a 'jobs' list (the output of squeue/sacct/scontrol --json)")
    return document


def _meta(document: dict) -> tuple[str, str]:
    meta = document.get("meta") or {}
    version = (meta.get("Slurm") or meta.get("slurm") or {}).get("version") or {}
    plugin = (meta.get("plugin") or {}).get("name") or (meta.get("plugins") or {}).get("data_parser") or ""
    if isinstance(version, dict):
        version = ".".join(str(version.get(part, "")) for part in ("major", "minor", "micro") if part in version)
    return str(version), str(plugin)


def _parse(raw, cluster: str, reader) -> ParseResult:
    with gc_paused():
        return _parse_document(raw, cluster, reader)


def _parse_document(raw, cluster: str, reader) -> ParseResult:
    document = _document(raw)
    version, plugin = _meta(document)
    result = ParseResult([], [], version, plugin)
    for message in document.get("errors") or []:
        if message:
            result.problems.append(ParseProblem(None, None, f"Slurm reported: {text(message.get('error') if isinstance(message, dict) else message)}"))
    for index, entry in enumerate(document["jobs"]):
        job_id = entry.get("job_id") if isinstance(entry, dict) else None
        try:
            if not isinstance(entry, dict):
                raise ValueError("not an object")
            result.jobs.append(reader(entry, cluster))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            result.problems.append(ParseProblem(index, job_id if isinstance(job_id, int) else None, str(exc) or exc.__class__.__name__))
    return result


def _job_id(entry: dict) -> int:
    job_id = number(entry.get("job_id"))
    if job_id is None or job_id <= 0:
        raise ValueError(f"missing or invalid job_id {json.dumps(entry.get('job_id'))[:40]}")
    return job_id


def _state_reason(reason) -> str:
    return text(reason) if reason not in (None, "None") else ""


def _described(entry: dict, *, user: str, command, comment: str, working_directory) -> dict:
    """The fields both documents spell the same way, and those derived from the command and comment."""
    return {
        "name": text(entry.get("name")), "user": text(entry.get(user)), "account": text(entry.get("account")),
        "partition": text(entry.get("partition")), "qos": text(entry.get("qos")),
        "working_directory": text(working_directory, 1000), "command": command, "comment": comment,
        "environment": environment_of(command, comment),
    }


def _grouping(array_job_id, array_task_id, array_task_string, het_job_id, het_offset) -> dict:
    """Array and heterogeneous-job membership; a task id or offset only counts with its parent job id."""
    array_job_id, het_job_id = number(array_job_id) or None, number(het_job_id) or None
    return {
        "array_job_id": array_job_id, "array_task_id": number(array_task_id) if array_job_id else None,
        "array_task_string": text(array_task_string),
        "het_job_id": het_job_id, "het_offset": number(het_offset) if het_job_id else None,
    }


def _placed(nodes: str, node_count) -> dict:
    return {"nodes": nodes, "node_list": expand_nodes(nodes), "node_count": number(node_count)}


def _squeue_job(entry: dict, cluster: str) -> SlurmJob:
    job_id = _job_id(entry)
    nodes = text(entry.get("nodes"), MAX_TEXT)
    state = state_of(entry.get("job_state"))
    active = state in JOB_STATES_ACTIVE
    # For pending and running jobs squeue's end_time is the projected end (start + time limit)
    # and exit_code a placeholder 0: neither is a fact yet.
    return_code, signal = exit_code_of(entry.get("exit_code")) if not active else (None, None)
    command = text(entry.get("command"), MAX_TEXT)
    return SlurmJob(
        cluster=cluster,
        job_id=job_id,
        state=state,
        state_reason=_state_reason(entry.get("state_reason")),
        **_grouping(entry.get("array_job_id"), entry.get("array_task_id"), entry.get("array_task_string"),
                    entry.get("het_job_id"), entry.get("het_job_offset")),
        submit_time=timestamp(entry.get("submit_time")),
        start_time=timestamp(entry.get("start_time")),
        end_time=None if active else timestamp(entry.get("end_time")),
        time_limit_minutes=number(entry.get("time_limit")),
        **_placed(nodes, entry.get("node_count")),
        tasks=number(entry.get("tasks")),
        gpus=gpus_from_tres(entry.get("tres_alloc_str"), entry.get("tres_req_str"), entry.get("tres_per_job"), entry.get("tres_per_node")),
        exit_code=return_code,
        signal=signal,
        **_described(entry, user="user_name", command=command, comment=text(entry.get("comment"), MAX_TEXT),
                     working_directory=entry.get("current_working_directory")),
    )


def _sacct_step(entry: dict) -> SlurmStep:
    step = entry.get("step") or {}
    step_id = step.get("id") if not isinstance(step.get("id"), dict) else step["id"].get("step_id", "")
    nodes = entry.get("nodes") or {}
    time = entry.get("time") or {}
    return_code, _ = exit_code_of(entry.get("exit_code"))
    return SlurmStep(
        step_id=text(step_id if step_id is not None else "", 40),
        name=text(step.get("name")),
        nodes=text(nodes.get("range") if isinstance(nodes, dict) else nodes, MAX_TEXT),
        tasks=number((entry.get("tasks") or {}).get("count")) if isinstance(entry.get("tasks"), dict) else None,
        state=state_of(entry.get("state")) if entry.get("state") else "",
        start=timestamp(time.get("start")),
        end=timestamp(time.get("end")),
        exit_code=return_code,
    )


def _sacct_job(entry: dict, cluster: str) -> SlurmJob:
    job_id = _job_id(entry)
    time = entry.get("time") or {}
    array = entry.get("array") or {}
    het = entry.get("het") or {}
    nodes = text(entry.get("nodes"), MAX_TEXT)
    state = state_of(entry.get("state"))
    return_code, signal = exit_code_of(entry.get("exit_code"))
    if return_code == 0 and state not in {"COMPLETED", *JOB_STATES_ACTIVE}:
        # sacct --json of Slurm 22.05.8 reports {"status": "SUCCESS", "return_code": 0} even for
        # a job that exited 3 (see tests/jobs/data/README.md): a zero beside a failed state is
        # not evidence, so leave the code unknown and keep what squeue or the epilog said.
        return_code = None
    tres = entry.get("tres") or {}
    allocated = ",".join(f"{item.get('type')}/{item.get('name')}={item.get('count')}" if item.get("name") else f"{item.get('type')}={item.get('count')}"
                         for item in (tres.get("allocated") or []) if isinstance(item, dict))
    command = text(entry.get("submit_line") or entry.get("command"), MAX_TEXT)
    limit = time.get("limit")
    state_detail = entry.get("state")
    return SlurmJob(
        cluster=text(entry.get("cluster")) or cluster,
        job_id=job_id,
        state=state,
        state_reason=_state_reason(state_detail.get("reason")) if isinstance(state_detail, dict) else "",
        **_grouping(array.get("job_id"), array.get("task_id"), array.get("task"), het.get("job_id"), het.get("job_offset")),
        submit_time=timestamp(time.get("submission")),
        start_time=timestamp(time.get("start")),
        end_time=timestamp(time.get("end")),
        time_limit_minutes=number(limit) if not isinstance(limit, dict) or limit.get("set", True) else None,
        **_placed(nodes, entry.get("allocation_nodes")),
        tasks=None,
        gpus=gpus_from_tres(allocated),
        exit_code=return_code,
        signal=signal,
        **_described(entry, user="user", command=command, comment=text(entry.get("comment"), MAX_TEXT),
                     working_directory=entry.get("working_directory")),
        steps=tuple(_sacct_step(step) for step in entry.get("steps") or [] if isinstance(step, dict)),
    )


def parse_squeue(raw, cluster: str) -> ParseResult:
    """Jobs from ``squeue --json`` (pending, running, and recently finished still in memory)."""
    return _parse(raw, cluster, _squeue_job)


def parse_scontrol(raw, cluster: str) -> ParseResult:
    """Jobs from ``scontrol show job --json`` (same job objects as squeue)."""
    return _parse(raw, cluster, _squeue_job)


def parse_sacct(raw, cluster: str) -> ParseResult:
    """Jobs from ``sacct --json`` (finished jobs and their steps, from accounting)."""
    return _parse(raw, cluster, _sacct_job)
