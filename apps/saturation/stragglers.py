"""Stragglers: GPUs and nodes that lag their peers, found with robust statistics and put on the hardware.

Each GPU is compared, interval by interval, with its peers: the GPUs at the same pipeline stage and
tensor lane in the other data-parallel replicas when the Megatron layout is known (they run the
same work), otherwise every GPU of the job. For each signal (SM clock, saturation S, busy time,
power: low is bad; temperature: high is bad) the modified z-score

    z = 0.6745 (x - median) / MAD            (MAD = median |x - median| over the peers)

is computed per interval (idle GPUs — reported as idle elsewhere — are neither peers nor suspects:
a working GPU is not "hot" next to idle ones), falling back to the mean absolute deviation when MAD is 0 and never
dividing by less than a small share of the median (so perfectly equal peers do not turn noise into
an outlier). An interval counts when |z| > 3.5 in the bad direction *and* the deviation is large
enough to matter (5 % of the peers' median, 5 °C for temperature). A GPU is a straggler on a signal
when such intervals persist — at least 3 of any 5 consecutive intervals, for 5 minutes in all,
inside the steady state. Since every test is relative to the peers, anything that moves all GPUs
alike (a checkpoint, a slower phase, a different job size) flags nobody.

Findings are then put on the hardware: GPU → node (all GPUs of a node lag together: the node or its
network, not one GPU) → switch and group (several lagging nodes behind the same switch or group:
suspect the fabric), each with a one-line reason such as "rank 388, nid001234 GPU 2: SM clock 28 %
below its peers for 41 min, power-limited".

Network evidence (``nic_evidence``: host → the NIC outliers of ``apps.telemetry.nic_analysis`` as dicts) names
the NIC: a lagging node whose NIC retries a third of its packets gets "network: hsn2 on nid000473: 31 % of
packets retried, its peers < 1 %" as its cause instead of a guess at its links; a GPU the NIC beside it (GPU k,
hsn k) lets down, the same. A NIC outlier on a node whose GPUs keep pace is a finding of its own (level
``nic``): the job does not wait for it yet, but the user should know. Healthy NICs add nothing.

Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

Z_THRESHOLD = 3.5
PERSIST_M, PERSIST_N = 3, 5  # at least m flagged intervals in any n consecutive ones
MIN_DURATION_S = 300.0
MIN_PEERS = 4
MAD_TO_SIGMA = 0.6745
MEAN_AD_TO_SIGMA = 1.253314
IDLE_BUSY = 0.05  # GPUs busy less than this in the steady state are idle: reported as such, never peers


@dataclass(frozen=True)
class Signal:
    name: str  # as the API names it
    metric: str  # the saturation product's metric
    words: str
    direction: int  # -1: lower than the peers is bad; +1: higher is bad
    relative: bool  # deviation as a share of the peers' median, else in the signal's unit
    min_effect: float  # smallest deviation that matters (share, or unit)
    unit: str = ""
    scale_floor: float = 0.005  # smallest spread used for z: share of the median (relative) or unit


SIGNALS = (
    Signal("sm_clock", "sm_clock", "SM clock", -1, True, 0.05, "MHz"),
    Signal("saturation", "S", "saturation", -1, True, 0.05),
    Signal("busy", "busy", "busy time", -1, True, 0.05),
    Signal("power", "power", "power", -1, True, 0.05, "W"),
    Signal("temperature", "temperature", "temperature", +1, False, 5.0, "°C", scale_floor=0.25),
)
SIGNAL_BY_NAME = {signal.name: signal for signal in SIGNALS}
LEVEL_ORDER = {"group": 0, "switch": 1, "node": 2, "gpu": 3, "nic": 4}
NIC_SIGNALS = {"retries": "nic_retries", "link": "nic_link_down", "throughput": "nic_throughput"}


@dataclass
class Straggler:
    level: str  # gpu, node, switch, group
    host: str | None
    gpu: int | None
    rank: int | None
    signal: str
    z: float  # median modified z-score over the flagged intervals (signed)
    deviation: float  # median deviation from the peers: share of their median, or in the unit
    duration_s: float
    start: str | None
    end: str | None
    reason: str
    cause: str = ""
    peers: str = ""
    nic: str | None = None
    switch: str | None = None
    group: int | None = None
    ranks: list = field(default_factory=list)
    hosts: list = field(default_factory=list)
    also: list = field(default_factory=list)  # other signals that lag on the same GPU
    network: list = field(default_factory=list)  # NIC outliers of the host (nic_analysis.NicOutlier dicts)

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Statistics


def peer_groups(gpus: pd.DataFrame) -> tuple[np.ndarray, str]:
    """A peer-group id per GPU row, and what the peers are in words."""
    count = len(gpus)
    if {"pp", "tp"} <= set(gpus.columns) and count and gpus[["pp", "tp"]].notna().all().all():
        pp, tp = gpus["pp"].to_numpy(np.int64), gpus["tp"].to_numpy(np.int64)
        groups = pp * (int(tp.max()) + 1) + tp
        sizes = np.bincount(np.unique(groups, return_inverse=True)[1])
        if sizes.min() >= MIN_PEERS:
            return groups, f"the GPUs at the same pipeline stage and tensor lane in the other {int(sizes.min()) - 1} data-parallel replicas"
    return np.zeros(count, dtype=np.int64), f"all {count} GPUs of the job"


def robust_z(values: np.ndarray, groups: np.ndarray, *, relative: bool, scale_floor: float) -> tuple[np.ndarray, np.ndarray]:
    """(modified z-score, peers' median) per GPU and interval, within each peer group."""
    values = np.asarray(values, dtype=float)
    z = np.full(values.shape, np.nan)
    median = np.full(values.shape, np.nan)
    for group in np.unique(groups):
        rows = np.flatnonzero(groups == group)
        block = values[rows]
        with np.errstate(all="ignore"):
            known = np.isfinite(block).sum(axis=0)
            middle = _nanmedian(block)
            deviation = block - middle
            mad = _nanmedian(np.abs(deviation))
            mean_ad = np.where(known > 0, np.nansum(np.abs(deviation), axis=0) / np.maximum(known, 1), np.nan)
            scale = np.where(mad > 0, mad / MAD_TO_SIGMA, MEAN_AD_TO_SIGMA * mean_ad)
            floor = scale_floor * np.abs(middle) if relative else np.full_like(middle, scale_floor)
            scale = np.fmax(scale, floor)
            scores = np.where(scale > 0, deviation / scale, 0.0)
        scores[:, known < MIN_PEERS] = np.nan  # too few peers reported in this interval to judge
        z[rows], median[rows] = scores, np.broadcast_to(middle, block.shape)
    return z, median


def _nanmedian(block: np.ndarray) -> np.ndarray:
    """Column medians ignoring NaN, NaN for an empty column, without numpy's all-NaN warnings."""
    if not block.size:
        return np.full(block.shape[1:], np.nan)
    ordered = np.sort(np.where(np.isfinite(block), block, np.inf), axis=0)
    counts = np.isfinite(block).sum(axis=0)
    columns = np.arange(block.shape[1])
    low = ((counts - 1) // 2).clip(min=0)
    high = (counts // 2).clip(min=0)
    high = np.minimum(high, (counts - 1).clip(min=0))
    with np.errstate(invalid="ignore"):
        middle = (ordered[low, columns] + ordered[high, columns]) / 2
    return np.where(counts > 0, middle, np.nan)


def persistent(flags: np.ndarray, m: int = PERSIST_M, n: int = PERSIST_N) -> np.ndarray:
    """Flagged intervals that belong to a window of ``n`` consecutive intervals with at least ``m``
    flagged: isolated blips drop out, a lasting problem stays (per row)."""
    flags = np.asarray(flags, dtype=bool)
    if flags.ndim != 2 or not flags.size:
        return flags.copy()
    columns = flags.shape[1]
    n = min(n, columns)
    m = min(m, n)
    running = np.concatenate([np.zeros((flags.shape[0], 1), dtype=np.int64), np.cumsum(flags, axis=1)], axis=1)
    in_window = running[:, n:] - running[:, :-n]  # (rows, columns - n + 1): flagged count per window start
    good = (in_window >= m).astype(np.int64)
    good_running = np.concatenate([np.zeros((flags.shape[0], 1), dtype=np.int64), np.cumsum(good, axis=1)], axis=1)
    starts = good.shape[1]
    t = np.arange(columns)
    first = np.clip(t - n + 1, 0, starts)  # windows covering interval t start in [t-n+1, t]
    last = np.clip(t + 1, 0, starts)
    covered = (good_running[:, last] - good_running[:, first]) > 0
    return flags & covered


# ---------------------------------------------------------------------------------------------
# Detection


def find_stragglers(signals: dict[str, np.ndarray], gpus: pd.DataFrame, *, interval_s: float,
                    times: np.ndarray | None = None, steady: np.ndarray | None = None,
                    context: dict[str, np.ndarray] | None = None, min_duration_s: float = MIN_DURATION_S,
                    threshold: float = Z_THRESHOLD, nic_evidence: dict[str, list[dict]] | None = None) -> list[Straggler]:
    """Stragglers among the job's GPUs.

    ``signals``: metric name (``SIGNALS[].metric``) → (gpus, intervals) values; missing ones are skipped.
    ``gpus``: one row per GPU with host, gpu and, when known, rank, pp, tp, dp, nic, switch, group.
    ``steady``: boolean per interval (the steady state); ``context``: ``power_capped`` and ``thermal``
    shares per GPU and interval, for the cause. ``nic_evidence``: host → its NIC outliers (dicts with at
    least host, nic, kinds, reason), from ``apps.telemetry.nic_analysis``."""
    nic_evidence = {str(host): list(items) for host, items in (nic_evidence or {}).items() if items}
    found = _gpu_stragglers(signals, gpus, interval_s=interval_s, times=times, steady=steady, context=context,
                            min_duration_s=min_duration_s, threshold=threshold, nic_evidence=nic_evidence)
    if nic_evidence:
        found = _with_network(found, gpus, nic_evidence)
    return found


def _gpu_stragglers(signals, gpus, *, interval_s, times, steady, context, min_duration_s, threshold, nic_evidence):
    count = len(gpus)
    if count < MIN_PEERS:
        return []
    columns = next((np.shape(array)[1] for array in signals.values() if array is not None), 0)
    if not columns:
        return []
    steady = np.ones(columns, dtype=bool) if steady is None else np.asarray(steady, dtype=bool)
    idle = np.zeros(count, dtype=bool)
    busy = signals.get("busy")
    if busy is not None and steady.any():
        busy = np.asarray(busy, dtype=float)[:, steady]
        with np.errstate(invalid="ignore"):
            seen = np.isfinite(busy).sum(axis=1)
            idle = (seen > 0) & (np.where(seen > 0, np.nansum(busy, axis=1) / np.maximum(seen, 1), 0.0) < IDLE_BUSY)
    if count - idle.sum() < MIN_PEERS:
        return []
    groups, peers = peer_groups(gpus)
    need = max(min_duration_s, PERSIST_M * interval_s)
    found: dict[int, list[dict]] = {}
    for signal in SIGNALS:
        values = signals.get(signal.metric)
        if values is None or not np.isfinite(values).any():
            continue
        if idle.any():
            values = np.where(idle[:, None], np.nan, np.asarray(values, dtype=float))
        z, median = robust_z(values, groups, relative=signal.relative, scale_floor=signal.scale_floor)
        with np.errstate(invalid="ignore", divide="ignore"):
            effect = (values - median) / np.abs(median) if signal.relative else values - median
            flags = (signal.direction * z > threshold) & (signal.direction * effect >= signal.min_effect)
        flags &= steady[None, :]
        kept = persistent(np.nan_to_num(flags, nan=False).astype(bool))
        durations = kept.sum(axis=1) * interval_s
        for row in np.flatnonzero(durations >= need):
            columns_kept = np.flatnonzero(kept[row])
            found.setdefault(int(row), []).append({
                "signal": signal, "z": float(np.median(z[row, columns_kept])),
                "deviation": float(np.median(effect[row, columns_kept])), "duration_s": float(durations[row]),
                "columns": columns_kept})
    if not found:
        return []
    context = context or {}
    items = [_gpu_finding(row, candidates, gpus, times, interval_s, context, peers, nic_evidence)
             for row, candidates in found.items()]
    return _localise(items, gpus, nic_evidence)


def _stamp(times, column) -> str | None:
    if times is None or column is None or not len(times):
        return None
    return str(np.datetime_as_string(np.asarray(times)[int(column)], unit="s")) + "Z"


def _cause(context: dict, row: int, columns: np.ndarray, signal: Signal) -> str:
    parts = []
    power = context.get("power_capped")
    thermal = context.get("thermal")
    if power is not None and columns.size and np.nanmean(power[row, columns]) >= 0.5:
        parts.append("power-limited")
    if thermal is not None and columns.size:
        share = float(np.nanmean(thermal[row, columns]))
        if share >= 0.05:
            parts.append(f"thermal slowdown {share:.0%} of the time")
    if signal.name == "temperature" and not parts:
        parts.append("running hot")
    return ", ".join(parts)


def _gpu_finding(row, candidates, gpus, times, interval_s, context, peers, nic_evidence=None) -> Straggler:
    primary = max(candidates, key=lambda c: abs(c["z"]) * c["duration_s"])
    signal = primary["signal"]
    record = gpus.iloc[row]
    rank = _int(record.get("rank"))
    columns = primary["columns"]
    cause = _cause(context, row, columns, signal)
    host, gpu = str(record["host"]), int(record["gpu"])
    beside = _text(record.get("nic"))
    network = [item for item in (nic_evidence or {}).get(host, []) if beside is None or item.get("nic") == beside]
    if network:
        cause = ", ".join(part for part in (cause, _network_cause(network)) if part)
    who = (f"rank {rank}, " if rank is not None else "") + f"{host} GPU {gpu}"
    reason = f"{who}: {describe(signal, primary['deviation'], 'its')} for {duration_words(primary['duration_s'])}"
    return Straggler(level="gpu", host=host, gpu=gpu, rank=rank, signal=signal.name, z=round(primary["z"], 2),
                     deviation=round(primary["deviation"], 4), duration_s=primary["duration_s"],
                     start=_stamp(times, columns[0] if columns.size else None),
                     end=_stamp(times, columns[-1] if columns.size else None),
                     reason=reason + (f", {cause}" if cause else ""), cause=cause, peers=peers,
                     nic=_text(record.get("nic")), switch=_text(record.get("switch")), group=_int(record.get("group")),
                     ranks=[rank] if rank is not None else [], hosts=[host],
                     also=[c["signal"].name for c in candidates if c is not primary], network=network)


def describe(signal: Signal, deviation: float, whose: str) -> str:
    side = "below" if deviation < 0 else "above"
    if signal.relative:
        return f"{signal.words} {abs(deviation):.0%} {side} {whose} peers"
    return f"{signal.words} {abs(deviation):.0f} {signal.unit} {side} {whose} peers"


def duration_words(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes % 60 else f"{minutes // 60} h"


def _int(value) -> int | None:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA or value == "":
        return None
    return str(value)


def _span(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if not ranks:
        return ""
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _network_cause(network: list[dict]) -> str:
    """"network: hsn2 on nid000473: 31 % of packets retried, its peers < 1 %" (each NIC outlier of the node)."""
    return "network: " + "; ".join(str(item.get("reason") or f"{item.get('nic')} on {item.get('host')}") for item in network)


def _with_network(found: list[Straggler], gpus: pd.DataFrame, nic_evidence: dict[str, list[dict]]) -> list[Straggler]:
    """A finding of level ``nic`` for every NIC outlier no GPU or node finding already names."""
    named = {(item.host, entry.get("nic")) for item in found for entry in item.network}
    lagging = {host for item in found for host in item.hosts}
    places = gpus.set_index("host") if len(gpus) and "host" in gpus else None
    out = list(found)
    for host, entries in sorted(nic_evidence.items()):
        for entry in entries:
            nic = entry.get("nic")
            if (host, nic) in named:
                continue
            kinds = list(entry.get("kinds") or ["retries"])
            keeps_pace = host not in lagging and places is not None and host in places.index
            reason = str(entry.get("reason") or f"{nic} on {host}")
            if keeps_pace:
                reason += "; the node's GPUs keep pace with their peers so far"
            switch = group = None
            if places is not None and host in places.index:
                rows = places.loc[[host]]
                if "nic" in rows and "switch" in rows:
                    match = rows[rows["nic"] == nic]
                    switch = _text(match["switch"].iloc[0]) if len(match) else None
                if "group" in rows and rows["group"].notna().any():
                    group = _int(rows["group"].dropna().iloc[0])
            fraction = entry.get("retry_fraction")
            ratio = entry.get("traffic_ratio")
            deviation = float(fraction) if kinds[0] == "retries" and fraction is not None else (
                float(ratio) - 1 if kinds[0] == "throughput" and ratio is not None else float(entry.get("link_down") or 0))
            z = entry.get("z")
            out.append(Straggler(level="nic", host=host, gpu=None, rank=None, signal=NIC_SIGNALS.get(kinds[0], "nic_retries"),
                                 z=round(float(z), 2) if z is not None else 0.0, deviation=round(deviation, 4),
                                 duration_s=float((entry.get("counters") or {}).get("seconds") or 0.0), start=None, end=None,
                                 reason=reason, cause="network", peers=f"the job's other {entry.get('peers', 0)} NICs",
                                 nic=nic, switch=switch, group=group, hosts=[host], network=[entry]))
    out.sort(key=lambda s: (LEVEL_ORDER[s.level], -abs(s.z) * s.duration_s))
    return out


def _localise(items: list[Straggler], gpus: pd.DataFrame, nic_evidence: dict | None = None) -> list[Straggler]:
    """Merge GPUs of one node that all lag into a node finding; add switch and group findings where
    several lagging nodes share the hardware."""
    gpus_per_host = gpus.groupby("host", sort=False)["gpu"].count().to_dict()
    by_host: dict[str, list[Straggler]] = {}
    for item in items:
        by_host.setdefault(item.host, []).append(item)
    out: list[Straggler] = []
    for host, members in by_host.items():
        if len(members) >= 2 and len(members) == gpus_per_host.get(host, 0):
            out.append(_node_finding(host, members, gpus, (nic_evidence or {}).get(host, [])))
        else:
            out.extend(members)
    lagging = list(out)
    switches = _fabric_findings(lagging, gpus, "switch")
    explained = {host for finding in switches for host in finding.hosts}
    out.extend(switches)
    out.extend(_fabric_findings(lagging, gpus, "group", explained=explained))
    out.sort(key=lambda s: (LEVEL_ORDER[s.level], -abs(s.z) * s.duration_s))
    return out


def _leading_signal(members: list[Straggler]) -> Signal:
    """The signal most members lag on; among equals, the one with the most weight (|z| x duration)."""
    weight: dict[str, list[float]] = {}
    for member in members:
        weight.setdefault(member.signal, []).append(abs(member.z) * member.duration_s)
    name = max(weight, key=lambda n: (len(weight[n]), sum(weight[n])))
    return SIGNAL_BY_NAME[name]


def _node_finding(host: str, members: list[Straggler], gpus: pd.DataFrame, network: list[dict] = ()) -> Straggler:
    signal = _leading_signal(members)
    alike = [m for m in members if m.signal == signal.name]
    deviation = float(np.median([m.deviation for m in alike]))
    duration = float(np.median([m.duration_s for m in alike]))
    z = float(np.median([m.z for m in alike]))
    ranks = sorted(r for m in members for r in m.ranks)
    causes = {m.cause for m in members if m.cause}
    rows = gpus[gpus["host"] == host]
    nics = sorted({str(n) for n in rows["nic"].dropna()}) if "nic" in rows else []
    switches = sorted({str(s) for s in rows["switch"].dropna()}) if "switch" in rows else []
    group = _int(rows["group"].dropna().iloc[0]) if "group" in rows and rows["group"].notna().any() else None
    network = list(network)
    causes = {c.split("network: ")[0].rstrip(", ") for c in causes} - {""}  # the GPUs' own; the node's NICs follow
    if network:
        cause = ", ".join([*sorted(causes), _network_cause(network)])
        nics = sorted({str(item.get("nic")) for item in network})
    elif causes:
        cause = ", ".join(sorted(causes))
    else:
        where = ""
        if nics:
            where = f" ({_nic_span(nics)}" + (f" on switch{'es' * (len(switches) > 1)} {', '.join(switches)}" if switches else "") + ")"
        cause = f"no throttling: suspect the node's host side or its network links{where}"
    who = f"{host}, all {len(members)} GPUs" + (f" ({_span(ranks)})" if ranks else "")
    reason = f"{who}: {describe(signal, deviation, 'their')} for {duration_words(duration)}; {cause}"
    starts = [m.start for m in members if m.start]
    ends = [m.end for m in members if m.end]
    return Straggler(level="node", host=host, gpu=None, rank=ranks[0] if ranks else None, signal=signal.name, z=round(z, 2),
                     deviation=round(deviation, 4), duration_s=duration, start=min(starts) if starts else None,
                     end=max(ends) if ends else None, reason=reason, cause=cause, peers=members[0].peers,
                     nic=_nic_span(nics) if nics else None, switch=", ".join(switches) or None, group=group, ranks=ranks,
                     hosts=[host], also=sorted({s for m in members for s in [m.signal, *m.also]} - {signal.name}),
                     network=network)


def _nic_span(nics: list[str]) -> str:
    if len(nics) > 2 and all(n.startswith("hsn") and n[3:].isdigit() for n in nics):
        return f"hsn{nics[0][3:]}-{nics[-1][3:]}"
    return ", ".join(nics)


def _fabric_findings(items: list[Straggler], gpus: pd.DataFrame, level: str, explained: set[str] = frozenset()) -> list[Straggler]:
    """Several lagging nodes behind one switch (or in one group), making up at least half of the job's
    nodes there: the shared hardware is the common suspect. A group is named only when at least two
    of its lagging nodes are not already explained by a switch finding."""
    if level not in gpus.columns or gpus[level].isna().all():
        return []
    all_hosts = gpus["host"].nunique()
    job_hosts = gpus.dropna(subset=[level]).groupby(level)["host"].nunique().to_dict()
    lagging: dict = {}
    for item in items:
        rows = gpus[gpus["host"] == item.host] if item.gpu is None else gpus[(gpus["host"] == item.host) & (gpus["gpu"] == item.gpu)]
        for place in rows[level].dropna().unique():
            lagging.setdefault(place, {})[item.host] = item
    out = []
    minimum = 2 if level == "switch" else 3
    for place, by_host in lagging.items():
        hosts = sorted(by_host)
        total = job_hosts.get(place, 0)
        if len(hosts) < minimum or len(hosts) * 2 < total or len(set(hosts) - explained) < 2 or len(hosts) * 2 > all_hosts:
            continue  # too few to correlate, a minority there, already explained, or half the job: no longer a straggler
        members = list(by_host.values())
        signal = _leading_signal(members)
        deviation = float(np.median([m.deviation for m in members if m.signal == signal.name]))
        duration = float(np.median([m.duration_s for m in members]))
        z = float(np.median([m.z for m in members]))
        name = f"switch {place}" if level == "switch" else f"group {place}"
        reason = (f"{name}: {len(hosts)} of the job's {total} nodes behind it lag their peers "
                  f"({describe(signal, deviation, 'their')}, {', '.join(hosts[:4])}{'…' if len(hosts) > 4 else ''}); "
                  f"suspect the {'switch or its links' if level == 'switch' else 'group’s switches or global links'}")
        out.append(Straggler(level=level, host=None, gpu=None, rank=None, signal=signal.name, z=round(z, 2),
                             deviation=round(deviation, 4), duration_s=duration, start=None, end=None, reason=reason,
                             cause="shared fabric", peers=members[0].peers,
                             switch=str(place) if level == "switch" else None,
                             group=_int(place) if level == "group" else None,
                             ranks=sorted(r for m in members for r in m.ranks), hosts=hosts))
    return out


def same_index_pattern(stragglers: list[dict], nodes: int) -> list[dict]:
    """GPU-level straggler findings (dicts as stored: ``level``, ``host``, ``gpu``, ``signal``) where the same local GPU
    index lags on many nodes: ``[{"gpu": 3, "hosts": [...], "signals": ["SM clock"], "items": [...]}]``, an index when its
    stragglers sit on at least two nodes and on at least half of the job's ``nodes`` (all of them, for a two-node job).

    GPU 3 slow on every node is not a set of bad nodes (excluding them all leaves no job): it is how local rank 3 is
    bound — its CPU or NIC affinity, the NUMA node it runs on, or the rank → GPU mapping — the same on every node."""
    by_index: dict[int, list[dict]] = {}
    for item in stragglers:
        if item.get("level", "gpu") != "gpu" or item.get("host") is None or _int(item.get("gpu")) is None:
            continue
        by_index.setdefault(_int(item["gpu"]), []).append(item)
    found = []
    for index, items in sorted(by_index.items()):
        hosts = sorted({str(item["host"]) for item in items})
        if len(hosts) >= 2 and 2 * len(hosts) >= max(nodes, len(hosts)):
            names = sorted({str(item.get("signal")) for item in items if item.get("signal")})
            signals = [SIGNAL_BY_NAME[name].words if name in SIGNAL_BY_NAME else name for name in names]
            found.append({"gpu": index, "hosts": hosts, "signals": signals, "items": items})
    return found
