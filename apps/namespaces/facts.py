"""The facts an approver decides on: the team's use against its envelope, and what the cluster has left,
each before and after the request.

``team_other`` / ``cluster_other``: what the team's / every live namespace holds apart from the one the
request is for; ``current``: what that namespace holds now (empty for a new one); ``asked``: what the
request holds. Now = other + current; after = other + asked (a change replaces what its namespace holds).

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .inventory import Inventory
from .quantities import QuantityError, bytes_text, cpu_text, human_bytes, parse_quantity
from .spec import Usage


@dataclass(frozen=True)
class EnvelopeRow:
    resource: str
    allowed: str  # the envelope's value as text ("" when the envelope does not limit it)
    now: str
    asked: str  # what this request holds (for a change: the namespace's new quota)
    after: str
    over: bool  # the team would hold more than its envelope after the request
    touched: bool  # the request asks for some of it


@dataclass(frozen=True)
class CapacityRow:
    resource: str  # "NVIDIA H100 SXM 80GB · whole GPUs", "storage · ceph-rbd"
    capacity: str  # "" when the inventory does not state it
    used_now: str
    asked: str
    left_after: str
    over: bool  # the cluster would not have it
    touched: bool


def _number(value) -> str:
    return str(int(value)) if Decimal(value) == Decimal(value).to_integral_value() else str(value)


def _limit(value, parse) -> Decimal | None:
    if value in (None, ""):
        return None
    try:
        return parse(value)
    except (QuantityError, ValueError, TypeError):
        return None


def envelope_rows(*, team_other: Usage, current: Usage, asked: Usage, envelope: dict, namespaces_other: int, new_namespace: bool) -> list[EnvelopeRow]:
    now, after = team_other + current, team_other + asked
    rows: list[EnvelopeRow] = []

    def add(resource, allowed, now_value, asked_value, after_value, show):
        over = allowed is not None and after_value > allowed
        rows.append(EnvelopeRow(resource, show(allowed) if allowed is not None else "", show(now_value), show(asked_value),
                                show(after_value), over, bool(asked_value)))

    add("CPU (cores)", _limit(envelope.get("cpu"), parse_quantity), now.cpu, asked.cpu, after.cpu, cpu_text)
    add("memory", _limit(envelope.get("memory"), parse_quantity), now.memory, asked.memory, after.memory, bytes_text)
    gpu_envelope = envelope.get("gpus") or {}
    for key in sorted(set(gpu_envelope) | set(now.gpus) | set(after.gpus)):
        allowed = Decimal(int(gpu_envelope.get(key, 0)))  # a GPU key the envelope leaves out allows none
        add(key, allowed, Decimal(now.gpus.get(key, 0)), Decimal(asked.gpus.get(key, 0)), Decimal(after.gpus.get(key, 0)), _number)
    storage_envelope = envelope.get("storage") or {}
    for name in sorted(set(storage_envelope) | set(now.storage) | set(after.storage)):
        add(f"storage · {name}", _limit(storage_envelope.get(name), parse_quantity), now.storage.get(name, Decimal(0)),
            asked.storage.get(name, Decimal(0)), after.storage.get(name, Decimal(0)), bytes_text)
    if envelope.get("namespaces") not in (None, ""):
        count_now = namespaces_other + (0 if new_namespace else 1)
        add("namespaces", Decimal(int(envelope["namespaces"])), Decimal(count_now), Decimal(1), Decimal(namespaces_other + 1), _number)
    return rows


def capacity_rows(inventory: Inventory, *, cluster_other: Usage, current: Usage, asked: Usage) -> list[CapacityRow]:
    now, after = cluster_other + current, cluster_other + asked
    rows: list[CapacityRow] = []
    for model in inventory.gpu_models.values():
        for profile in model.profiles:
            capacity = model.capacity(profile)
            if not capacity:
                continue
            key = (model.id, profile)
            used, wanted, taken = now.models.get(key, 0), asked.models.get(key, 0), after.models.get(key, 0)
            label = "whole GPUs" if profile == "whole" else f"MIG {profile}"
            rows.append(CapacityRow(f"{model.label} · {label}", str(capacity), str(used), str(wanted), str(capacity - taken),
                                    taken > capacity, bool(wanted)))
    for name in inventory.storage_classes:
        capacity = inventory.storage_capacity.get(name)
        used, wanted, taken = now.storage.get(name, Decimal(0)), asked.storage.get(name, Decimal(0)), after.storage.get(name, Decimal(0))
        if capacity is None:
            rows.append(CapacityRow(f"storage · {name}", "", bytes_text(used), bytes_text(wanted), "not stated in the inventory", False, bool(wanted)))
            continue
        left = capacity - taken
        rows.append(CapacityRow(f"storage · {name}", bytes_text(capacity), bytes_text(used), bytes_text(wanted),
                                human_bytes(left) if left >= 0 else f"−{human_bytes(-left)} (short)", left < 0, bool(wanted)))
    return rows
