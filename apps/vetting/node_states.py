"""Node health states and who may move a node between them.

    healthy ─┬─> suspect ──────────┬─> drain recommended ─> drained ─> in repair ─> returned ─> healthy
             └─────────────────────┘           (staff, or a rule's exclude-now)

Rules only ever *raise* a node's state (healthy or returned → suspect → drain recommended); they
never drain, resume or clear a node. Staff acknowledge, drain, send to repair, return and clear, each
with a reason. Draining and returning can run ``scontrol`` through the action backend
(``scontrol.py``); a node is only ever returned to service by Belvedere when Belvedere drained it.

Plain Python: no Django.
"""
from __future__ import annotations

STATES = ("healthy", "suspect", "drain_recommended", "drained", "in_repair", "returned")
STATE_WORDS = {"healthy": "healthy", "suspect": "suspect", "drain_recommended": "drain recommended", "drained": "drained",
               "in_repair": "in repair", "returned": "returned to service"}
LEVEL = {"healthy": 0, "returned": 0, "suspect": 1, "drain_recommended": 2, "drained": 3, "in_repair": 3}
RULE_ACTIONS = {"suspect": "suspect", "drain_recommended": "drain_recommended", "exclude_now": "drain_recommended"}

# staff action -> (states it applies to, state it leads to; None = unchanged)
STAFF_ACTIONS = {
    "acknowledge": (("suspect", "drain_recommended", "drained", "in_repair"), None),
    "drain": (("healthy", "suspect", "drain_recommended", "returned"), "drained"),
    "repair": (("drained",), "in_repair"),
    "return": (("drained", "in_repair"), "returned"),
    "clear": (("suspect", "drain_recommended", "returned"), "healthy"),
}
ACTION_WORDS = {"acknowledge": "acknowledged", "drain": "drained", "repair": "sent to repair", "return": "returned to service",
                "clear": "cleared"}


class TransitionError(ValueError):
    """The action does not apply to the node's current state; the message says what would."""


def rule_target(current: str, action: str) -> str | None:
    """The state a rule's action moves a node to, or None when the node is already there or beyond."""
    target = RULE_ACTIONS[action]
    return target if LEVEL[target] > LEVEL.get(current, 0) else None


def staff_target(current: str, action: str) -> str:
    """The state a staff action leads to (the current one for acknowledge); TransitionError otherwise."""
    if action not in STAFF_ACTIONS:
        raise TransitionError(f"unknown action {action!r}; choose {', '.join(STAFF_ACTIONS)}")
    sources, target = STAFF_ACTIONS[action]
    if current not in sources:
        possible = [name for name, (where, _) in STAFF_ACTIONS.items() if current in where]
        raise TransitionError(f"a node that is {STATE_WORDS.get(current, current)} cannot be {ACTION_WORDS[action]}; "
                              f"possible: {', '.join(possible) or 'nothing'}")
    return target or current


def allowed_actions(current: str) -> list[str]:
    return [name for name, (where, _) in STAFF_ACTIONS.items() if current in where]
