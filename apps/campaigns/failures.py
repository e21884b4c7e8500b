"""Which allocations of a campaign ended other than by design, why, and the mean time between failures.

:func:`classify` reads what the portal recorded about one allocation's end (:class:`JobEnd`: Slurm's state, exit
code, signal and reason, its steps, the application's last progress and last completed checkpoint, the GPU health
counters' XIDs, the nodes vetting failed, the flight recorder's verdict on a hang) and names the cause with its
evidence, or returns None for an end by design. First match wins:

1. **node failure**: Slurm ended the job with NODE_FAIL (or BOOT_FAIL);
2. **GPU XID error**: an XID the GPU health counters saw rise on the job's GPUs while it ran;
3. **out of memory**: Slurm's OUT_OF_MEMORY, on the job or a step;
4. **NCCL timeout**: no progress for at least ``NCCL_TIMEOUT_S`` before a bad end that aborted (SIGABRT, exit 134:
   the NCCL watchdog aborts the process when a collective times out) or that the flight recorder called a stuck
   collective; the same silence without that evidence is a **hang**;
5. **time limit without a final checkpoint**: TIMEOUT with iterations after the last completed checkpoint (a
   TIMEOUT whose last checkpoint holds its last iteration is the chain's design: the next allocation goes on);
6. **cancelled** (with work since the last checkpoint: a cancel right after a checkpoint is by design),
   **preempted**, and any other failed end (**application error**), with ``apps.jobs.endings``' words.

MTBF: the campaign's allocated wall hours over its failures, and the same per 1,000 nodes (node-hours over failures,
divided by 1,000: the MTBF a 1,000-node run would see). With no failure it is unknown (None), never invented.
Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from apps.core.numbers import duration_words
from apps.jobs.endings import Step, ending, signal_of

NCCL_TIMEOUT_S = 300.0  # PyTorch's NCCL watchdog times out after 10 min by default; 5 min of silence is a hang
CAUSES = {
    "node_failure": "node failure",
    "gpu_xid": "GPU XID error",
    "oom": "out of memory",
    "nccl_timeout": "NCCL timeout",
    "hang": "hang",
    "time_limit_no_checkpoint": "time limit without a final checkpoint",
    "cancelled": "cancelled",
    "preempted": "preempted",
    "application_error": "application error",
}


@dataclass(frozen=True)
class JobEnd:
    key: str  # "cluster/job_id"
    state: str
    start: datetime | None
    end: datetime | None
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    limit_minutes: int | None = None
    nodes: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    last_progress: datetime | None = None
    last_step: int | None = None
    last_checkpoint_step: int | None = None  # its last completed checkpoint
    xids: tuple[str, ...] = ()  # the GPU health counters' XID changes in words
    bad_nodes: tuple[str, ...] = ()  # nodes vetting failed around the job
    hang_verdict: str | None = None  # the flight recorder's verdict, when it has one
    log_oom: bool = False  # the job's output said out of memory


@dataclass(frozen=True)
class Failure:
    job: str
    end: datetime | None
    kind: str  # a key of CAUSES
    cause: str  # CAUSES[kind]
    evidence: str
    nodes: tuple[str, ...] = ()
    lost_gpu_hours: float = 0.0


@dataclass(frozen=True)
class Mtbf:
    failures: int
    hours: float  # allocated wall hours
    node_hours: float
    mtbf_hours: float | None
    mtbf_hours_per_1000_nodes: float | None
    words: str = ""
    extra: dict = field(default_factory=dict)


ACTIVE = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", ""}


def _progress_words(end: JobEnd) -> str:
    if end.last_step is None:
        return "it logged no iteration"
    checkpoint = (f"; its last completed checkpoint was at iteration {end.last_checkpoint_step:,}"
                  if end.last_checkpoint_step is not None else "; it completed no checkpoint")
    return f"its last progress was iteration {end.last_step:,}" + checkpoint


def _silence(end: JobEnd) -> float | None:
    if end.last_progress is None or end.end is None:
        return None
    return max(0.0, (end.end - end.last_progress).total_seconds())


def covered(end: JobEnd) -> bool:
    """Every iteration it logged is in a completed checkpoint (or it logged none)."""
    return end.last_step is None or (end.last_checkpoint_step is not None and end.last_checkpoint_step >= end.last_step)


def classify(end: JobEnd) -> tuple[str, str] | None:
    """(cause kind, evidence in words) for an allocation that ended other than by design; None otherwise."""
    state = (end.state or "").upper()
    if state in ACTIVE or end.end is None:
        return None
    sig = signal_of(end.exit_code, end.signal)
    code = end.exit_code
    silence = _silence(end)
    nodes = ", ".join(end.nodes[:8]) + (" …" if len(end.nodes) > 8 else "")
    bad = f" Vetting failed {', '.join(end.bad_nodes[:6])} around the job." if end.bad_nodes else ""
    said = f" Slurm's reason: {end.reason}." if end.reason and end.reason.lower() != "none" else ""
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return "node_failure", (f"Slurm ended the job with {state} on its nodes ({nodes}).{said}{bad} "
                                f"{_progress_words(end).capitalize()}.")
    if end.xids:
        return "gpu_xid", f"{'; '.join(end.xids[:4])}. The job ended {state}.{bad} {_progress_words(end).capitalize()}."
    if state == "OUT_OF_MEMORY" or end.log_oom or any(s.state.upper() == "OUT_OF_MEMORY" for s in end.steps):
        where = "the job's output says out of memory" if end.log_oom else "Slurm recorded OUT_OF_MEMORY"
        return "oom", f"{where}.{said} {_progress_words(end).capitalize()}."
    failed_state = state in ("FAILED", "CANCELLED", "TIMEOUT", "DEADLINE") or (state == "COMPLETED" and (code or sig))
    if failed_state and silence is not None and silence >= NCCL_TIMEOUT_S and state != "TIMEOUT":
        quiet = f"No iteration for {duration_words(silence)} before the end"
        if sig == 6 or code == 134 or end.hang_verdict:
            how = "; the process aborted (SIGABRT), as PyTorch's NCCL watchdog does when a collective times out" \
                if sig == 6 or code == 134 else ""
            verdict = f" Flight recorder: {end.hang_verdict}." if end.hang_verdict else ""
            return "nccl_timeout", f"{quiet}{how}.{verdict} {_progress_words(end).capitalize()}."
        return "hang", f"{quiet}, then {state}.{said} {_progress_words(end).capitalize()}."
    if state == "TIMEOUT":
        if covered(end):
            return None
        limit = f" of {duration_words(end.limit_minutes * 60)}" if end.limit_minutes else ""
        return "time_limit_no_checkpoint", (f"The job reached its time limit{limit}; {_progress_words(end)}: the "
                                            f"iterations after it were not saved.")
    if state == "COMPLETED" and not code and not sig:
        return None
    if state == "CANCELLED":
        if covered(end):
            return None
        return "cancelled", f"The job was cancelled.{said} {_progress_words(end).capitalize()}."
    if state == "PREEMPTED":
        return "preempted", f"A job of higher priority took its nodes.{said} {_progress_words(end).capitalize()}."
    found = ending(state=state, exit_code=code, signal=end.signal, reason=end.reason, steps=list(end.steps),
                   limit_minutes=end.limit_minutes,
                   elapsed_s=(end.end - end.start).total_seconds() if end.start and end.end else None)
    words = found.cause if found is not None else f"the job ended {state}"
    return "application_error", f"{words[0].upper()}{words[1:]} {_progress_words(end).capitalize()}."


def mtbf(failures: int, hours: float, node_hours: float) -> Mtbf:
    """The campaign's mean time between failures, and per 1,000 nodes; None for both without a failure."""
    if failures <= 0:
        return Mtbf(0, hours, node_hours, None, None,
                    f"No failure in {duration_words(hours * 3600)} of allocations: the mean time between failures is "
                    f"unknown (not invented).")
    value = hours / failures
    per_1000 = node_hours / failures / 1000.0 if node_hours > 0 else None
    words = (f"{failures} failure{'s' if failures != 1 else ''} in {duration_words(hours * 3600)} of allocations: one "
             f"every {value:.1f} h" + (f"; on 1,000 nodes one every {per_1000:.2f} h" if per_1000 else "") + ".")
    return Mtbf(failures, hours, node_hours, value, per_1000, words)
