"""How a job ended, and the likely cause, in words for the first screen of its page.

A job that failed, ran out of time or memory, lost a node or was cancelled is the first thing its page must
say (issue 35, item 4: a failed job opened with "Nothing needs your attention" and its exit code at the
bottom). :func:`ending` reads what Slurm recorded — the final state, the exit code or signal, Slurm's reason,
the time limit, the steps — and returns the end state with its likely cause and one thing to do, or None for
a job that completed cleanly (or still runs). Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from apps.core.numbers import duration_words

# Final states that are not a clean end, and how loud the first screen says them.
LEVELS = {"FAILED": "critical", "NODE_FAIL": "critical", "OUT_OF_MEMORY": "critical", "BOOT_FAIL": "critical",
          "TIMEOUT": "warning", "CANCELLED": "warning", "PREEMPTED": "warning", "DEADLINE": "warning"}
# Signals a job's processes die of, with what usually sends them.
SIGNALS = {
    9: "SIGKILL — killed outright: the kernel's out-of-memory killer, or Slurm at the time limit or on cancel after its grace time",
    15: "SIGTERM — asked to stop: a cancel, a preemption or the time limit",
    11: "SIGSEGV — a segmentation fault (a bad memory access in native code: a library, an extension, a driver)",
    6: "SIGABRT — the program aborted itself (a failed assertion, or a CUDA/NCCL error that calls abort())",
    7: "SIGBUS — a bus error (often a full /dev/shm or a file removed while mapped)",
    4: "SIGILL — an illegal instruction (a binary built for another CPU or GPU)",
    2: "SIGINT — interrupted",
    1: "SIGHUP — its terminal or launcher went away",
}
# Exit codes with a usual meaning of their own (the shell's and Python's conventions).
EXIT_CODES = {
    1: "a general error: the program stopped on an exception or an error it reported",
    2: "a usage error: Python's argparse and the shell exit 2 on a wrong argument or a file that is not there",
    126: "a command that cannot run (not executable)",
    127: "a command not found (a missing module, a wrong PATH in the container)",
}


@dataclass(frozen=True)
class Step:
    step_id: str
    name: str = ""
    state: str = ""
    exit_code: int | None = None


@dataclass(frozen=True)
class Ending:
    level: str  # "critical" or "warning"
    title: str  # the end state, exit code or signal, and when
    cause: str  # the likely cause, in words
    action: str  # one thing to do
    facts: list[str] = field(default_factory=list)  # short words for the state tile: "exit code 2", "signal 9"


def signal_of(exit_code: int | None, signal: int | None) -> int | None:
    """The signal that ended the job: Slurm's own, else a shell's 128 + n exit code (137 = SIGKILL)."""
    if signal:
        return int(signal)
    if exit_code is not None and 128 < exit_code < 160:
        return exit_code - 128
    return None


def ending(*, state: str, exit_code: int | None = None, signal: int | None = None, reason: str = "",
           elapsed_s: float | None = None, limit_minutes: int | None = None, when: str = "", nodes: int | None = None,
           steps: list[Step] | tuple = (), hang: str | None = None) -> Ending | None:
    """The first-screen finding of a job that ended badly; None when it completed with exit code 0 (or runs).

    ``when``: the end in words ("14:02 UTC"); ``elapsed_s``: how long it ran; ``reason``: Slurm's reason
    (``state_reason``), said as it is when Slurm gave one. ``hang``: the Flight Recorder's verdict when the job's
    ranks were stuck in a collective (``apps.core.hang_verdicts``): then the hang is the likely cause, whatever
    ended the job, and more time or a plain resubmission is not the advice."""
    state = (state or "").upper()
    sig = signal_of(exit_code, signal)
    code = None if sig and exit_code is not None and exit_code > 128 else exit_code
    facts = ([f"exit code {code}"] if code not in (None, 0) else []) + ([f"signal {sig}"] if sig else [])
    ran = f" after {duration_words(elapsed_s)}" if elapsed_s else ""
    at = f" at {when}" if when else ""
    by_slurm = f" Slurm's reason: {reason}." if reason and reason.lower() not in ("none", "") else ""
    at_limit = bool(limit_minutes and elapsed_s is not None and elapsed_s >= limit_minutes * 60 - 60)
    failed_step = next((s for s in steps if (s.exit_code or 0) != 0 or s.state.upper() in LEVELS), None)
    step_words = ""
    if failed_step is not None:
        name = f" ({failed_step.name})" if failed_step.name and failed_step.name != failed_step.step_id else ""
        step_words = (f" Step {failed_step.step_id}{name}: {failed_step.state.lower().replace('_', ' ') or 'ended badly'}"
                      + (f", exit code {failed_step.exit_code}" if failed_step.exit_code not in (None, 0) else "") + ".")

    if state == "COMPLETED" and not code and not sig:
        return None
    if state not in LEVELS and state != "COMPLETED":
        return None  # running, pending, or a state Slurm did not say
    level = LEVELS.get(state, "warning")
    how = ", ".join(facts)
    if hang and state in LEVELS:
        stopped = {"TIMEOUT": f"reached its time limit{at}{ran} while stuck: Slurm stopped it",
                   "CANCELLED": f"was cancelled{at}{ran} while stuck"}.get(state, f"{'failed' if state == 'FAILED' else state.lower().replace('_', ' ')}{at}{ran}")
        return Ending("critical", f"The job {stopped}" + (f" ({how})" if how and state != "TIMEOUT" else "") + ".",
                      f"a stuck collective, found in its Flight Recorder dumps: {hang}." + by_slurm,
                      "More time would only wait longer: resubmit without the culprit's node (--exclude=<node>) and tell "
                      "staff; the Stuck collectives panel shows who reached where.", facts)
    if state == "TIMEOUT":
        limit = f" of {duration_words(limit_minutes * 60)}" if limit_minutes else ""
        return Ending(level, f"The job reached its time limit{limit}{at}{ran}: Slurm stopped it.",
                      "time limit" + (f"; {how}" if how else "") + "." + by_slurm,
                      "Resubmit from the last checkpoint with a longer --time, or checkpoint more often so less is lost.",
                      facts)
    if state == "OUT_OF_MEMORY":
        return Ending(level, f"The job ran out of host memory{at}{ran}: the out-of-memory killer ended a task.",
                      "a task used more host memory than the job's memory limit" + by_slurm,
                      "Ask for the whole node's memory (--mem=0), use fewer data-loader workers, or find the rank that "
                      "grows (the host-side panel).", facts)
    if state == "NODE_FAIL":
        return Ending(level, f"A node of the job failed{at}{ran}: Slurm ended the job.",
                      (reason or "a node stopped answering Slurm (hardware, kernel or network)") + ".",
                      "Resubmit: Slurm takes a failed node out of service; if it repeats on the same node, the vetting "
                      "panel and staff triage name it.", facts)
    if state == "CANCELLED":
        who = ""
        if reason and "by" in reason.lower():
            who = f" ({reason})"
        return Ending(level, f"The job was cancelled{who}{at}{ran}" + (f", {how}" if how else "") + ".",
                      (SIGNALS[sig] if sig in SIGNALS else "scancel by its user or project, or staff (a drain or a "
                       "maintenance)") + "." + by_slurm,
                      "If nobody in the project cancelled it, ask staff: maintenance and drains cancel jobs.", facts)
    if state == "PREEMPTED":
        return Ending(level, f"The job was preempted{at}{ran}: a job of higher priority took its nodes.",
                      "preemption by the scheduler." + by_slurm,
                      "Resubmit from the last checkpoint (or submit with --requeue so Slurm does it).", facts)
    # FAILED, BOOT_FAIL, DEADLINE, or COMPLETED with a non-zero code
    what = "failed" if state in ("FAILED", "COMPLETED") else state.lower().replace("_", " ")
    title = f"The job {what}{at}{ran}" + (f": {how}" if how else "") + "."
    if sig == 9:
        cause = ("killed by SIGKILL at its time limit" if at_limit else
                 "killed by SIGKILL: most often the out-of-memory killer (host memory), or a cancel after the grace time")
        action = ("Check the job's memory use (sacct -j <id> -o MaxRSS) and ask for more (--mem=0), or a longer --time."
                  if not at_limit else "Resubmit with a longer --time, or checkpoint more often.")
    elif sig in SIGNALS:
        cause = SIGNALS[sig]
        action = "Read the end of the job's error output for the first error; a core dump or a stack trace names the library."
    elif code in EXIT_CODES:
        cause = f"exit code {code}: {EXIT_CODES[code]}"
        action = "Read the first error in the job's error output (slurm-<id>.out or its --error file): it names what failed."
    elif code:
        cause = f"the program exited with code {code}"
        action = "Read the first error in the job's error output (slurm-<id>.out or its --error file): it names what failed."
    else:
        cause = "Slurm recorded no exit code or signal"
        action = "Read the job's output files for the first error."
    return Ending(level, title, cause + "." + step_words + by_slurm, action, facts)
