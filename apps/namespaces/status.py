"""What a status refresh makes of a namespace's recorded state: the rules, apart from Argo CD's client.

A refresh only ever says what it knows:

* A recorded failure (``failed``, ``degraded``) and its reason stay until Argo CD itself reports
  something else. Without Argo CD, or while Argo CD cannot be reached, nobody can report that the
  failure is gone, so the state and the reason are kept; the page shows the remark beside them.
* Without Argo CD a namespace waiting for a sync (``provisioning``, ``syncing``) resolves to
  ``committed``: "committed to git at <time>; no Argo CD to report sync". One with nothing
  committed after ``PROVISIONING_TIMEOUT`` fails with that message.
* With Argo CD, a namespace still not synced ``PROVISIONING_TIMEOUT`` after its commit fails with
  what Argo CD last said, and moves on when Argo CD reports it ready or failed.

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# How long a namespace may wait for its first sync before it is failed with a message. Argo CD syncs a
# new directory within its polling interval (3 minutes by default) plus the image pulls of the services.
PROVISIONING_TIMEOUT = timedelta(minutes=30)

FAILURES = ("failed", "degraded")
WAITING = ("provisioning", "syncing")
LEFT_ALONE = ("frozen", "tearing_down", "archived")


@dataclass(frozen=True)
class Known:
    """What is recorded about a namespace before the refresh."""

    state: str
    message: str
    commit: str
    committed_at: datetime | None  # when its last commit was made (None: nothing committed)
    created: datetime


@dataclass(frozen=True)
class Outcome:
    state: str
    message: str  # the namespace's status message (a recorded failure's reason is never replaced by a remark)
    remark: str = ""  # what this refresh could not know, shown beside the message ("" clears the last one)


def _at(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "an unknown time"


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def committed_message(commit: str, committed_at: datetime | None) -> str:
    return f"committed to git at {_at(committed_at)} ({commit[:12]}); no Argo CD to report sync"


def without_argo(known: Known, now: datetime, timeout: timedelta = PROVISIONING_TIMEOUT) -> Outcome:
    """No Argo CD is configured: say what git knows, keep what was recorded."""
    last_commit = f"; last commit {known.commit[:12]} at {_at(known.committed_at)}" if known.commit else ""
    if known.state in FAILURES:
        return Outcome(known.state, known.message, f"no Argo CD configured: nothing reports whether this was fixed{last_commit}")
    if known.state == "ready":
        return Outcome(known.state, known.message, f"no Argo CD configured: this is the last state Argo CD reported{last_commit}")
    if known.state in LEFT_ALONE:
        return Outcome(known.state, known.message)
    if known.commit:
        return Outcome("committed", committed_message(known.commit, known.committed_at))
    waited = now - known.created
    if waited >= timeout:
        return Outcome("failed", f"nothing was committed to git {_minutes(waited)} minutes after the namespace was created: "
                                 f"the commit did not happen (see its request's steps)")
    return Outcome(known.state, known.message or "waiting for the commit to git")


def argo_unreachable(known: Known, error: str) -> Outcome:
    """Argo CD did not answer: the state and the message are the last ones read; the remark says why there is no newer one."""
    return Outcome(known.state, known.message, f"status unknown now: {error}")


def from_argo(known: Known, state: str, message: str, now: datetime, timeout: timedelta = PROVISIONING_TIMEOUT) -> Outcome:
    """Argo CD answered with ``state`` (ready, syncing, degraded, failed) and ``message``."""
    if state == "syncing" and known.committed_at and now - known.committed_at >= timeout:
        waited = _minutes(now - known.committed_at)
        return Outcome("failed", f"timed out: not synced {waited} minutes after commit {known.commit[:12]} "
                                 f"(committed at {_at(known.committed_at)}); Argo CD says: {message}")
    return Outcome(state, message)
