"""How far the demo build has come, for the pages that run beside it (a plain module: no Django).

``make run`` serves the portal as soon as the database is migrated and builds the demo in the background
(``deploy/supervise.py``). The build runs in one transaction, so nothing it writes to the database is visible
before it ends; it reports its progress instead in a small JSON file beside the database, written atomically
after each part (:class:`ProgressFile`). The login and home pages read it (:func:`read_progress`) and show a
progress bar that the browser refreshes in place until the demo is ready.

A state is one of:

* ``building``: parts ``done`` of ``total``, the one being built (``current``) and the seconds each finished
  part took;
* ``ready``: built (``seconds`` in all);
* ``failed``: the build raised; ``error`` is its last line (the terminal has the traceback);
* ``stopped``: the file says ``building`` but the process that wrote it is gone (killed, machine restarted):
  :func:`read_progress` says so instead of showing a bar that never moves.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BUILDING, READY, FAILED, STOPPED = "building", "ready", "failed", "stopped"
STATES = (BUILDING, READY, FAILED, STOPPED)


@dataclass
class Progress:
    state: str
    total: int
    seed: int
    pid: int
    started: float  # seconds since the epoch
    updated: float
    done: list[dict] = field(default_factory=list)  # [{"name": part, "seconds": s}], in build order
    current: str = ""
    error: str = ""
    weights: dict = field(default_factory=dict)  # part -> its rough share of the build's time (default 1)

    @property
    def elapsed(self) -> float:
        return max(0.0, (self.updated if self.state != BUILDING else time.time()) - self.started)

    @property
    def fraction(self) -> float:
        """How much of the build is done, by the parts' weights (parts take from a second to a minute)."""
        if self.state == READY:
            return 1.0
        total = sum(self.weights.values()) if self.weights else self.total
        done = sum(self.weights.get(part["name"], 1.0) for part in self.done) if self.weights else len(self.done)
        return min(1.0, done / total) if total else 0.0

    @property
    def part(self) -> str:
        """The part being built, in words: "part 7 of 18 (network)"."""
        label = f"part {min(len(self.done) + 1, self.total)} of {self.total}"
        return f"{label} ({self.current})" if self.current else label

    def as_json(self) -> dict:
        """What the progress API answers (no pid: it says nothing to a browser)."""
        return {"state": self.state, "parts_done": len(self.done), "parts_total": self.total,
                "current": self.current, "done": [part["name"] for part in self.done],
                "seed": self.seed, "elapsed_s": round(self.elapsed, 1), "percent": round(100 * self.fraction),
                "error": self.error}


class ProgressFile:
    """Writes a build's progress to ``path``; each write replaces the file whole (a reader never sees half)."""

    def __init__(self, path: Path | str, *, parts: dict[str, float], seed: int, clock=time.time):
        """``parts``: every part's name and weight, in build order."""
        self.path = Path(path)
        self._clock = clock
        now = clock()
        self.progress = Progress(state=BUILDING, total=len(parts), seed=seed, pid=os.getpid(), started=now, updated=now,
                                 weights=dict(parts))

    def _write(self) -> None:
        self.progress.updated = self._clock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(asdict(self.progress)))
        partial.replace(self.path)

    def start(self, part: str) -> None:
        self.progress.current = part
        self._write()

    def finish(self, part: str, seconds: float) -> None:
        self.progress.done.append({"name": part, "seconds": round(seconds, 2)})
        self.progress.current = ""
        self._write()

    def ready(self) -> None:
        self.progress.state, self.progress.current = READY, ""
        self._write()

    def failed(self, error: BaseException | str) -> None:
        text = str(error).strip() or type(error).__name__
        self.progress.state, self.progress.error = FAILED, text.splitlines()[-1][:300].rstrip(".")
        self._write()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:  # a zombie (the build ended, its parent has not reaped it yet) is not building any more
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def read_progress(path: Path | str) -> Progress | None:
    """The last progress written to ``path``; None when no build wrote one or the file is unreadable."""
    try:
        data = json.loads(Path(path).read_text())
        progress = Progress(**data)
    except (OSError, ValueError, TypeError):
        return None
    if progress.state not in STATES:
        return None
    if progress.state == BUILDING and not _alive(progress.pid):
        progress.state = STOPPED
        progress.error = "the build process is gone (stopped or killed); make run builds it again"
    return progress
