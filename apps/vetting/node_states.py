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


def can(action: str, current: str) -> bool:
    """Whether staff ``action`` applies to a node in state ``current``."""
    return action in STAFF_ACTIONS and current in STAFF_ACTIONS[action][0]


# A node a switch finding names, in one of these states and with no finding of its own, is that switch's:
# it is listed in the switch's one row, not in a row of its own (one problem, one row, one action).
SWITCH_ABSORBS = ("healthy", "suspect")


def switch_rows(switches, states: dict[str, str], *, own_findings=()) -> tuple[list[dict], set[str]]:
    """Triage at the switch's level.

    ``switches``: ``[(switch, hosts, extra)]`` — each switch finding with the nodes behind it (``extra``, a dict, is
    carried into the row); ``states``: host -> health state of the nodes not plainly healthy; ``own_findings``: the
    hosts a node finding names. Returns one row per switch — ``{"switch", "nodes": [(host, state)], "drainable":
    [hosts a drain applies to], "others": [(host, state)] the nodes in a state of their own, **extra}`` — and the
    hosts these rows absorb (those a node table leaves out)."""
    own = set(own_findings)
    rows, absorbed = [], set()
    for switch, hosts, extra in switches:
        nodes = [(host, states.get(host, "healthy")) for host in sorted(dict.fromkeys(hosts))]
        mine = {host for host, state in nodes if state in SWITCH_ABSORBS and host not in own}
        absorbed |= mine
        rows.append({**extra, "switch": switch, "nodes": nodes,
                     "drainable": [host for host, state in nodes if can("drain", state)],
                     "others": [(host, state) for host, state in nodes if host not in mine]})
    return rows, absorbed


def would_words(action: str, hosts: list[str], skipped: list[tuple[str, str]] = ()) -> str:
    """"would drain 14 nodes" (and what is left out, and why): a dry run of one action over many nodes, in words."""
    verb = {"drain": "drain", "return": "return"}.get(action, action)
    text = f"would {verb} {len(hosts)} node{'s' * (len(hosts) != 1)}"
    if skipped:
        text += f" ({len(skipped)} left out: " + "; ".join(f"{host} {why}" for host, why in skipped[:5]) + \
                ("; …" if len(skipped) > 5 else "") + ")"
    return text
