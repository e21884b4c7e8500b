"""Draining and returning nodes in Slurm, carefully.

``SlurmNodeActions`` runs ``scontrol`` through a command runner (the jobs app's, which times out and
says what failed). It is a dry run unless told otherwise: it then answers with the exact command it
would have run. Every drain it makes carries a reason starting with ``Belvedere:``, and it resumes a
node only when the node is drained with such a reason — a node drained by someone else (staff, NHC,
a prolog) is never returned to service by Belvedere, whatever the portal's state says.

Plain Python: no Django.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable

PREFIX = "Belvedere:"
_REASON = re.compile(r"\bReason=(?P<reason>.*?)(?:\s+\[(?P<user>[^@\]]+)@(?P<time>[^\]]+)\])?\s*(?=\s\w+=|$)")
_FIELD = re.compile(r"(?:^|\s)(?P<key>[A-Za-z]+)=(?P<value>\S*)")


class ActionRefused(RuntimeError):
    """The action would touch a node Belvedere must leave alone; the message says why."""


@dataclass
class NodeInfo:
    name: str
    state: str  # e.g. IDLE+DRAIN, MIXED, DOWN*+DRAIN
    reason: str = ""
    reason_user: str = ""
    reason_time: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.upper()

    @property
    def drained_by_belvedere(self) -> bool:
        return self.drained and self.reason.startswith(PREFIX)


@dataclass
class ActionResult:
    host: str
    action: str  # drain, resume
    command: list[str]
    executed: bool
    message: str
    output: str = ""
    dry_run: bool = False  # nothing was run because actions are dry runs (not: there was nothing to do)

    @property
    def command_line(self) -> str:
        """The command as a shell reads it back: every argument quoted (a reason with $(...) or backticks stays text)."""
        return shlex.join(self.command)


def parse_node_line(line: str) -> NodeInfo:
    """One line of ``scontrol show node -o``."""
    fields = {match.group("key"): match.group("value") for match in _FIELD.finditer(line)}
    if "NodeName" not in fields:
        raise ValueError(f"not a line of scontrol show node -o: {line[:80]!r}")
    info = NodeInfo(name=fields["NodeName"], state=fields.get("State", ""))
    match = _REASON.search(line)
    if match:
        info.reason = match.group("reason").strip()
        info.reason_user, info.reason_time = match.group("user") or "", match.group("time") or ""
    return info


class SlurmNodeActions:
    def __init__(self, run: Callable[[list[str], float], str], *, dry_run: bool = True, timeout: float = 60.0,
                 scontrol: str = "scontrol"):
        self.run, self.dry_run, self.timeout, self.scontrol = run, dry_run, timeout, scontrol

    def info(self, host: str) -> NodeInfo:
        output = self.run([self.scontrol, "show", "node", "-o", host], self.timeout)
        line = next((line for line in output.splitlines() if line.startswith("NodeName=")), "")
        if not line:
            raise ValueError(f"scontrol knows no node {host}")
        return parse_node_line(line)

    def drain(self, host: str, reason: str) -> ActionResult:
        text = " ".join(f"{PREFIX} {reason}".split())[:200]
        command = [self.scontrol, "update", f"NodeName={host}", "State=DRAIN", f"Reason={text}"]
        if self.dry_run:
            return ActionResult(host, "drain", command, False, "dry run: Slurm was not changed", dry_run=True)
        output = self.run(command, self.timeout)
        return ActionResult(host, "drain", command, True, f"{host} drained", output)

    def resume(self, host: str) -> ActionResult:
        """Return a node Belvedere drained; refuse any other drained node."""
        command = [self.scontrol, "update", f"NodeName={host}", "State=RESUME"]
        try:
            info = self.info(host)
        except Exception as exc:  # noqa: BLE001 - a dry run may not reach Slurm; a real one must
            if self.dry_run:
                return ActionResult(host, "resume", command, False, f"dry run: Slurm was not asked ({exc})", dry_run=True)
            raise
        if not info.drained:
            return ActionResult(host, "resume", command, False, f"{host} is not drained in Slurm ({info.state}): nothing to resume")
        if not info.drained_by_belvedere:
            who = f" by {info.reason_user}" if info.reason_user else ""
            raise ActionRefused(f"{host} was drained{who} with reason '{info.reason}', not by Belvedere: "
                                "Belvedere only resumes nodes it drained; ask whoever drained it")
        if self.dry_run:
            return ActionResult(host, "resume", command, False, "dry run: Slurm was not changed", dry_run=True)
        output = self.run(command, self.timeout)
        return ActionResult(host, "resume", command, True, f"{host} resumed", output)
