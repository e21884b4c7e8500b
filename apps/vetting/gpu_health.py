"""GPU-health counters judged: which rose (or show a failing flag) on which GPU, and what that means for the node.

DCGM keeps error counters and flags per GPU (``apps/telemetry/fields.py``, group ``"health"``): ECC errors,
retired pages, remapped rows, NVLink errors, PCIe replays and the last XID code. A counter that rose over an
interval is new evidence; a flag that is set (row remapping failed, a remap or a page retirement pending a
reset) is a standing problem. Each kind is judged as NVIDIA's guidance reads it:

* **failed** (the node should be drained: ``drain_recommended``): new double-bit (uncorrectable) ECC errors,
  new rows remapped after uncorrectable errors, row remapping failed, pages pending retirement, and the XIDs
  that mean broken hardware (48 double-bit ECC, 61/62 internal micro-controller, 64 remapping failure,
  74 NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP, 140 unrecovered ECC);
* **degraded** (``suspect``): NVLink CRC, replay and recovery errors rising, pages retired, a row remap
  pending a reset, and the XIDs that warn (63 page retirement / row remap recorded, 92 high single-bit
  rate, 94 contained ECC error);
* **noted** (shown on the job page, no state change): single-bit (corrected) ECC errors, rows remapped
  after correctable errors, PCIe replays, XIDs that are usually the application's (13, 31, 43, 45 …).

Input is what the telemetry store's ``aggregate`` gives (per epoch-aligned bucket and GPU series: ``min``
and ``max``), so a job of any length is judged from a bounded table. Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

import pandas as pd

from apps.telemetry import fields

FAILED, DEGRADED, NOTED = "failed", "degraded", "noted"
LEVEL_ORDER = {FAILED: 0, DEGRADED: 1, NOTED: 2}
NODE_STATE = {FAILED: "drain_recommended", DEGRADED: "suspect"}  # the vetting state each level raises a node to
SEVERITY = {FAILED: "critical", DEGRADED: "warning"}

# field id -> (how it is read, level when it rose / is set, what one unit of it is called (singular, plural))
COUNTER, FLAG, XID = "counter", "flag", "xid"
JUDGED: dict[int, tuple[str, str, tuple[str, str]]] = {
    311: (COUNTER, FAILED, ("double-bit ECC error", "double-bit ECC errors")),
    313: (COUNTER, FAILED, ("double-bit ECC error (aggregate)", "double-bit ECC errors (aggregate)")),
    393: (COUNTER, FAILED, ("row remapped after an uncorrectable error", "rows remapped after uncorrectable errors")),
    395: (FLAG, FAILED, ("row remapping failed", "row remapping failed")),
    392: (FLAG, FAILED, ("page pending retirement (needs a GPU reset)", "pages pending retirement (needs a GPU reset)")),
    396: (FLAG, DEGRADED, ("row remap pending a GPU reset", "row remap pending a GPU reset")),
    390: (COUNTER, DEGRADED, ("page retired after single-bit errors", "pages retired after single-bit errors")),
    391: (COUNTER, DEGRADED, ("page retired after double-bit errors", "pages retired after double-bit errors")),
    409: (COUNTER, DEGRADED, ("NVLink flit CRC error", "NVLink flit CRC errors")),
    419: (COUNTER, DEGRADED, ("NVLink data CRC error", "NVLink data CRC errors")),
    429: (COUNTER, DEGRADED, ("NVLink replay", "NVLink replays")),
    439: (COUNTER, DEGRADED, ("NVLink recovery", "NVLink recoveries")),
    310: (COUNTER, NOTED, ("single-bit (corrected) ECC error", "single-bit (corrected) ECC errors")),
    312: (COUNTER, NOTED, ("single-bit ECC error (aggregate)", "single-bit ECC errors (aggregate)")),
    394: (COUNTER, NOTED, ("row remapped after a correctable error", "rows remapped after correctable errors")),
    202: (COUNTER, NOTED, ("PCIe replay", "PCIe replays")),
    230: (XID, NOTED, ("XID", "XIDs")),
}
HEALTH_FIELDS = tuple(sorted(JUDGED))

XID_FAILED = {48: "double-bit ECC error", 61: "internal micro-controller breakpoint", 62: "internal micro-controller halt",
              64: "ECC page retirement or row remapping failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
              95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error"}
XID_DEGRADED = {63: "ECC page retirement or row remapping recorded", 92: "high single-bit ECC error rate",
                94: "contained ECC error"}
XID_APPLICATION = {13: "graphics engine exception (usually the application)", 31: "GPU memory page fault (usually the application)",
                   43: "GPU stopped processing (usually the application)", 45: "preemptive cleanup (after another error or a kill)"}


@dataclass(frozen=True)
class HealthChange:
    """One GPU's health counter that rose, or flag that is set, over the interval judged."""

    host: str
    gpu: int
    field: int
    name: str  # the DCGM name people know (legacy where DCGM 4.6 renamed it)
    level: str  # FAILED, DEGRADED or NOTED
    before: float  # the value at the start of the interval
    after: float  # the value at its end (for an XID: the new code)
    rise: float  # how much it rose (1 for a flag newly set or a new XID)
    first_seen: datetime  # the start of the first bucket it rose (or was set) in
    since: datetime  # the start of the interval
    new: bool  # rose or was set inside the interval (False: a flag already set at its start)
    what: str  # "4 new double-bit ECC errors"

    @property
    def words(self) -> str:
        """"nid000123 GPU 2: 4 new double-bit ECC errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL 306 → 310) since 10:04 UTC"."""
        if self.field == 230:
            values = f"{self.name} {_number(self.after)}"
        elif self.new:
            values = f"{self.name} {_number(self.before)} → {_number(self.after)}"
        else:
            values = f"{self.name} {_number(self.after)}"
        when = f"since {self.since:%H:%M} UTC" if self.new else f"already at {self.since:%H:%M} UTC"
        return f"{self.host} GPU {self.gpu}: {self.what} ({values}) {when}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _counter_rise(buckets: pd.DataFrame) -> tuple[float, int | None]:
    """How much a cumulative counter rose over ordered buckets (min, max each), and the first bucket it rose in.
    A drop (driver reload, GPU reset) restarts the count from the lower value: rises before and after add up
    (a rise inside the very bucket of the reset shows one bucket later, against that bucket's minimum)."""
    total, first = 0.0, None
    mins, maxs = buckets["min"].to_numpy(dtype=float), buckets["max"].to_numpy(dtype=float)
    level = mins[0]
    for i, (low, high) in enumerate(zip(mins, maxs)):
        if low < level:  # a reset in this bucket: its max may be from before it, count only what exceeds the old level
            rose = high - level
            level = low
            if rose > 0:
                total += rose
                first = i if first is None else first
            continue  # what rose after the reset shows in the next bucket's max against the low
        if high > level:
            total += high - level
            level = high
            if first is None:
                first = i
    return total, first


def judge(aggregate: pd.DataFrame, *, since: datetime, levels: Iterable[str] = (FAILED, DEGRADED, NOTED)) -> list[HealthChange]:
    """The health changes in ``aggregate`` (columns bucket, host, gpu, field, min, max; any order), most
    severe first. ``since`` is the start of the interval (for the words)."""
    wanted = set(levels)
    if aggregate is None or aggregate.empty:
        return []
    frame = aggregate[aggregate["field"].isin(HEALTH_FIELDS)]
    changes: list[HealthChange] = []
    for (host, gpu, field_id), group in frame.sort_values("bucket", kind="stable").groupby(["host", "gpu", "field"], sort=True):
        how, level, (one, many) = JUDGED[int(field_id)]
        group = group.dropna(subset=["min", "max"])
        if group.empty:
            continue
        buckets = list(group["bucket"])
        name = fields.FIELDS[int(field_id)].display_name
        first_min, last_max = float(group["min"].iloc[0]), float(group["max"].iloc[-1])
        if how == COUNTER:
            rise, first = _counter_rise(group)
            if rise <= 0 or level not in wanted:
                continue
            count = _number(rise)
            what = f"{count} new {one if rise == 1 else many}"
            changes.append(HealthChange(host, int(gpu), int(field_id), name, level, first_min, last_max, rise,
                                        buckets[first], since, True, what))
        elif how == FLAG:
            last_min = float(group["min"].iloc[-1])
            if last_min <= 0 and last_max <= 0:
                continue
            if level not in wanted:
                continue
            new = first_min <= 0
            set_at = next(i for i, high in enumerate(group["max"]) if high > 0)
            value = last_max
            what = (f"{_number(value)} {many}" if int(field_id) == 392 else one)
            changes.append(HealthChange(host, int(gpu), int(field_id), name, level, first_min, value, 1.0,
                                        buckets[set_at], since, new, what))
        else:  # XID: the last code seen; a code different from the one at the start is new
            known = {first_min}
            for i, (low, high) in enumerate(zip(group["min"], group["max"])):
                for code in (float(low), float(high)):
                    if code > 0 and code not in known:
                        known.add(code)
                        xid = int(code)
                        xid_level = FAILED if xid in XID_FAILED else DEGRADED if xid in XID_DEGRADED else NOTED
                        if xid_level not in wanted:
                            continue
                        meaning = XID_FAILED.get(xid) or XID_DEGRADED.get(xid) or XID_APPLICATION.get(xid) or "see NVIDIA's XID catalogue"
                        changes.append(HealthChange(host, int(gpu), 230, name, xid_level, first_min, code, 1.0,
                                                    buckets[i], since, True, f"XID {xid} ({meaning})"))
    changes.sort(key=lambda c: (LEVEL_ORDER[c.level], c.host, c.gpu, c.field, c.first_seen))
    return changes


@dataclass(frozen=True)
class NodeVerdict:
    host: str
    level: str  # FAILED or DEGRADED
    state: str  # the vetting state it raises the node to
    severity: str
    reason: str  # every change that made it, most severe first (cut to 500 characters by the caller)
    changes: tuple[HealthChange, ...]


def node_verdicts(changes: Iterable[HealthChange]) -> dict[str, NodeVerdict]:
    """host -> what its failed or degraded changes make of the node (noted changes change no state)."""
    by_host: dict[str, list[HealthChange]] = {}
    for change in changes:
        if change.level in NODE_STATE:
            by_host.setdefault(change.host, []).append(change)
    verdicts = {}
    for host, found in by_host.items():
        found.sort(key=lambda c: (LEVEL_ORDER[c.level], c.gpu, c.field))
        level = found[0].level
        reason = "GPU health: " + "; ".join(change.words for change in found)
        verdicts[host] = NodeVerdict(host, level, NODE_STATE[level], SEVERITY[level], reason, tuple(found))
    return verdicts


def job_words(changes: list[HealthChange]) -> str:
    """One sentence for the first screen: which GPUs, which counters, by how much."""
    shown = "; ".join(change.words for change in changes[:3])
    more = f"; and {len(changes) - 3:,} more" if len(changes) > 3 else ""
    return shown + more
