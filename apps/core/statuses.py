"""One status vocabulary for every page: any state a source reports ("FAILED", "Fail", "failed",
"node_fail", "OUT_OF_MEMORY") is shown in one casing ("Failed", "Node fail", "Out of memory") with one
colour per meaning. The ``status_badge`` template tag (apps.core.templatetags.belvedere) renders it;
static/js/belvedere.js applies the same rules to states a script fills in.

Imports no framework: plain strings in and out, tested on their own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Meanings, each one colour (static/css/belvedere.css: .status--<meaning>).
OK, ACTIVE, WAITING, WARN, FAIL, NEUTRAL, INFO = "ok", "active", "waiting", "warn", "fail", "neutral", "info"
MEANINGS = (OK, ACTIVE, WAITING, WARN, FAIL, NEUTRAL, INFO)

# Keys are normalised states (lower case, words joined by "_").
_MEANING = {
    OK: {"ok", "pass", "passed", "success", "succeeded", "successful", "completed", "complete", "done", "healthy",
         "ready", "sent", "fresh", "synced", "approved", "resolved", "returned", "live", "up", "available"},
    ACTIVE: {"running", "completing", "syncing", "provisioning", "in_progress", "started", "active", "configuring",
             "tearing_down", "importing", "in_repair", "acknowledged", "applying"},
    WAITING: {"pending", "queued", "waiting", "waiting_approval", "scheduled", "suspended", "requeued", "open",
              "new", "checking", "held"},
    WARN: {"warn", "warning", "degraded", "suspect", "aging", "drain_recommended", "partial", "stale_data",
           "late", "out_of_sync", "outofsync", "skipped_some", "frozen"},
    FAIL: {"fail", "failed", "failure", "error", "errored", "node_fail", "out_of_memory", "oom", "timeout",
           "deadline", "boot_fail", "critical", "stale", "rejected", "drained", "down", "unreachable", "broken",
           "invalid", "missing"},
    NEUTRAL: {"cancelled", "canceled", "preempted", "ended", "other", "unknown", "skipped", "archived", "none",
              "not_run", "withdrawn", "closed", "revoked", "superseded", "n_a"},
    INFO: {"info", "notice", "note"},
}
_BY_STATE = {state: meaning for meaning, states in _MEANING.items() for state in states}

# Synonyms shown as one word, so a page never says "Fail" next to "Failed".
_SYNONYMS = {"fail": "failed", "failure": "failed", "errored": "error", "pass": "passed", "success": "succeeded",
             "successful": "succeeded", "canceled": "cancelled", "warn": "warning", "outofsync": "out_of_sync",
             "oom": "out_of_memory", "complete": "completed"}
# Words kept in capitals.
_ACRONYMS = {"ok": "OK", "gpu": "GPU", "mig": "MIG", "api": "API", "nccl": "NCCL", "oom": "OOM", "argo": "Argo",
             "cd": "CD", "n/a": "n/a"}


@dataclass(frozen=True)
class Status:
    state: str  # the normalised state: "node_fail"
    words: str  # as shown: "Node fail"
    meaning: str  # one of MEANINGS


def normalise(value) -> str:
    """'FAILED' -> 'failed', 'Node Fail' / 'node-fail' / 'NodeFail'... -> 'node_fail'; None -> 'unknown'."""
    text = "" if value is None else str(getattr(value, "value", value)).strip()
    if not text:
        return "unknown"
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text)  # CamelCase -> Camel_Case
    text = re.sub(r"[\s\-_.]+", "_", text.lower()).strip("_")
    return text or "unknown"


def words(value) -> str:
    """The state as the portal shows it: sentence case, one word per synonym ('Fail' -> 'Failed')."""
    state = _SYNONYMS.get(normalise(value), normalise(value))
    parts = [_ACRONYMS.get(part, part) for part in state.split("_")]
    first = parts[0]
    if first == first.lower():
        parts[0] = first[:1].upper() + first[1:]
    return " ".join(parts)


def meaning(value) -> str:
    """The colour class of a state: ok, active, waiting, warn, fail, neutral or info (unknown states: neutral)."""
    state = normalise(value)
    return _BY_STATE.get(state) or _BY_STATE.get(_SYNONYMS.get(state, ""), NEUTRAL)


def status(value) -> Status:
    return Status(state=normalise(value), words=words(value), meaning=meaning(value))


def vocabulary() -> dict:
    """The rules as data, for a page's script (static/js/belvedere.js ``statusBadge``) to show states it fills in."""
    return {"meanings": dict(sorted(_BY_STATE.items())), "synonyms": dict(_SYNONYMS), "acronyms": dict(_ACRONYMS)}
