"""Hardware faults in a job's straggler findings, put on the node: what node health and staff triage take from them.

The straggler detector (``stragglers.py``) names a NIC that retries far more than its peers (a finding of level
``nic``, or the NIC evidence of a lagging GPU or node), a GPU hotter than its peers (signal ``temperature``, or a
thermal slowdown in its cause) and a GPU whose clocks are held down (its SM clock lagging, or power-limited). Each
becomes one fault of its node:

* ``nic_retries`` / ``nic_link``: the NIC's own words ("hsn2 on nid000473: 31 % of packets retried, its peers < 1 %");
  critical when the job waits for that node (a GPU or node straggler), a warning while its GPUs keep pace;
* ``hot_gpu``: a GPU straggler on temperature, or with a thermal slowdown; critical (the job waits for it);
* ``throttled_gpu``: a GPU straggler on SM clock, or power-limited; critical.

A NIC that only moves less than its peers is a symptom, not a fault: it is left to the job page. Switch and group
findings are the fabric's, not a node's. Plain Python: no Django.
"""
from __future__ import annotations

from datetime import datetime


def _when(stamp) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


def _nic_faults(entries, *, host_default, severity: str, since) -> list[dict]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        kinds = list(entry.get("kinds") or ["retries"])
        kind = "nic_retries" if "retries" in kinds else "nic_link" if "link" in kinds else None
        host = entry.get("host") or host_default
        if kind is None or not host:
            continue
        what = str(entry.get("reason") or f"{entry.get('nic') or 'a NIC'} on {host}")
        out.append({"host": str(host), "kind": kind, "severity": severity, "what": what, "since": since})
    return out


def node_faults(stragglers: list[dict]) -> list[dict]:
    """``[{"host", "kind", "severity", "what", "since"}]`` for the hardware faults in a job's straggler findings (one
    per host and kind: the most severe first seen)."""
    found: dict[tuple[str, str], dict] = {}

    def add(fault: dict) -> None:
        key = (fault["host"], fault["kind"])
        if key not in found or (fault["severity"] == "critical" and found[key]["severity"] != "critical"):
            found[key] = fault

    for item in stragglers or []:
        if not isinstance(item, dict):
            continue
        level = item.get("level", "gpu")
        since = _when(item.get("start"))
        hosts = [item["host"]] if item.get("host") else list(item.get("hosts") or [])
        if level == "nic":
            for fault in _nic_faults(item.get("network") or [{**item, "kinds": [str(item.get("signal", "")).replace("nic_", "")]}],
                                     host_default=item.get("host"), severity="warning", since=since):
                add(fault)
            continue
        if level not in ("gpu", "node"):
            continue
        for fault in _nic_faults(item.get("network"), host_default=item.get("host"), severity="critical", since=since):
            add(fault)
        cause = str(item.get("cause") or "").lower()
        signals = {item.get("signal"), *(item.get("also") or [])}
        reason = str(item.get("reason") or "")
        for host in hosts:
            if item.get("signal") == "temperature" or "thermal" in cause or "running hot" in cause:
                add({"host": str(host), "kind": "hot_gpu", "severity": "critical", "what": reason, "since": since})
            if "sm_clock" in signals or "power-limited" in cause:
                add({"host": str(host), "kind": "throttled_gpu", "severity": "critical", "what": reason, "since": since})
    return list(found.values())
