"""NIC counters into rates, retry fractions and the NICs that stand out from their peers.

Input: the telemetry store's ``aggregate_net`` frame — per epoch-aligned bucket and (host, nic, field): ``count``,
``first``, ``last``, ``min``, ``max`` of the samples in the bucket. Cumulative counters are turned into what moved in
each bucket:

* within a bucket ``last - first``; between buckets ``first - previous bucket's last`` (credited to the later
  bucket, whose time span then runs from the previous bucket's start: a gap in the samples spreads its traffic
  evenly instead of making a spike);
* a counter that goes back either **wrapped** (the Cassini counters are 56 bits wide: the value before was within
  ``WRAP_MARGIN`` of 2**56) — the step is ``value - before + 2**56`` — or was **reset** (a driver reload: the
  count restarts at zero) — the step is the new value, never negative. Inside a bucket the largest sample
  (``max``) is the last one before the reset, so the bucket moved ``max - first + last``;
* the first bucket of a NIC has only its own samples: its span is ``step x (count - 1) / count`` (samples spread
  evenly), none with one sample; a bucket holding fewer samples than the NIC's usual count (the one still filling
  while the job runs) spans only that share of its step, so it does not read as a drop.

:func:`nic_rates` gives per NIC and bucket: bytes/s and packets/s in and out, retries/s, the **retry fraction**
(Δnic_retries / Δnic_tx_packets), link-down events. :func:`nic_totals` sums a NIC over the window.
:func:`nic_outliers` compares every NIC with the job's others (median and MAD, robust to the outliers themselves):
a retry fraction far above theirs, link flaps where they have none, or far less traffic than theirs while they
are busy. Each outlier carries a sentence ("hsn2 on nid000473: 31 % of packets retried, its peers < 1 %") and its
numbers. A job whose NICs are all alike gets none.

Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

COUNTER_BITS = 56
WRAP = float(2 ** COUNTER_BITS)
# A counter that went back from within this of 2**56 wrapped; from lower down it was reset (driver reload).
# 2**50 bytes is ~13 h of a 200 Gb/s link: far more than a bucket.
WRAP_MARGIN = float(2 ** 50)

TX_BYTES, RX_BYTES = "nic_tx_bytes", "nic_rx_bytes"
TX_PACKETS, RX_PACKETS = "nic_tx_packets", "nic_rx_packets"
RETRIES, LINK_DOWN = "nic_retries", "nic_link_down"
LINK_UP = "nic_link_up"  # gauge: 1 up, 0 down
NIC_COUNTERS = (TX_BYTES, RX_BYTES, TX_PACKETS, RX_PACKETS, RETRIES, LINK_DOWN)

RATE_COLUMNS = ["bucket", "host", "nic", "seconds", "tx_bytes_s", "rx_bytes_s", "tx_packets_s", "rx_packets_s",
                "retries_s", "retry_fraction", "link_down"]
TOTAL_COLUMNS = ["host", "nic", "seconds", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "retries",
                 "retry_fraction", "link_down", "tx_bytes_s", "rx_bytes_s", "resets", "wraps"]

# Outliers
MIN_PEERS = 4  # fewer NICs than this: no peer comparison, only the absolute alarm below
Z_THRESHOLD = 3.5
MAD_TO_SIGMA = 0.6745
RETRY_MIN = 0.02  # a retry fraction must be at least this to be an outlier...
RETRY_FACTOR = 3.0  # ...and this many times the peers' median
RETRY_FLOOR = 0.002  # smallest spread of retry fractions used for z (alike peers do not turn noise into outliers)
RETRY_ALARM = 0.10  # without enough peers, a retry fraction this high is still named
MIN_PACKETS = 1000  # a NIC that sent fewer packets has no meaningful retry fraction
LOW_TRAFFIC = 0.5  # a NIC moving less than this share of its peers' median...
BUSY_SHARE = 0.25  # ...in buckets where the peers move at least this share of their busiest bucket
MIN_BUSY_BUCKETS = 3
LOW_PERSIST = 0.6  # ...in at least this share of those buckets


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["bucket"] = pd.to_datetime(frame["bucket"], utc=True)
    return frame.sort_values(["host", "nic", "field", "bucket"], kind="stable").reset_index(drop=True)


def counter_steps(frame: pd.DataFrame, step_s: float) -> pd.DataFrame:
    """Per (host, nic, field, bucket) of an ``aggregate_net`` frame: ``delta`` (what the counter moved, wraps
    and resets handled), ``seconds`` (the span it moved in; NaN when unknown), ``resets`` and ``wraps`` (0/1)."""
    if frame.empty:
        return pd.DataFrame(columns=["bucket", "host", "nic", "field", "delta", "seconds", "resets", "wraps"])
    frame = _sorted(frame)
    first, last = frame["first"].to_numpy(float), frame["last"].to_numpy(float)
    high = frame["max"].to_numpy(float)
    count = frame["count"].to_numpy(float)
    key = frame["host"].astype(str) + "\0" + frame["nic"].astype(str) + "\0" + frame["field"].astype(str)
    new_series = (key != key.shift(1)).to_numpy()
    # inside the bucket
    within = last - first
    back = within < 0
    wrapped_in = back & (high >= WRAP - WRAP_MARGIN)
    within = np.where(wrapped_in, last - first + WRAP, within)
    reset_in = back & ~wrapped_in
    within = np.where(reset_in, (high - first) + last, within)
    # between this bucket and the one before
    before = np.concatenate([[np.nan], last[:-1]])
    between = first - before
    back_between = ~new_series & (between < 0)
    wrapped_between = back_between & (before >= WRAP - WRAP_MARGIN)
    reset_between = back_between & ~wrapped_between
    between = np.where(wrapped_between, between + WRAP, between)
    between = np.where(reset_between, first, between)
    between = np.where(new_series, 0.0, between)
    buckets = ((frame["bucket"] - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(float)
    previous = np.concatenate([[np.nan], buckets[:-1]])
    # A bucket after another spans from the one before; one holding fewer samples than the series' usual count (the
    # last bucket of a running job, still filling) only the share of its step that its samples cover.
    usual = pd.Series(count).groupby(key.to_numpy()).transform("median").to_numpy(float)
    filled = np.clip(count / np.maximum(usual, 1.0), 0.0, 1.0)
    seconds = np.where(new_series, np.where(count >= 2, step_s * (count - 1) / np.maximum(count, 1), np.nan),
                       buckets - previous - step_s + step_s * filled)
    out = frame[["bucket", "host", "nic", "field"]].copy()
    out["delta"] = within + between
    out["seconds"] = seconds
    out["resets"] = (reset_in | reset_between).astype(int)
    out["wraps"] = (wrapped_in | wrapped_between).astype(int)
    return out


def nic_rates(frame: pd.DataFrame, step_s: float) -> pd.DataFrame:
    """Per NIC and bucket (``RATE_COLUMNS``): bytes/s and packets/s out and in, retries/s, the retry fraction
    (NaN where nothing was sent), link-down events (the counter's step; a ``nic_link_up`` gauge that read 0
    counts one where the counter is missing). Sorted by host, nic, bucket."""
    if frame is None or frame.empty:
        return pd.DataFrame(columns=RATE_COLUMNS)
    counters = frame[frame["field"].isin(NIC_COUNTERS)]
    steps = counter_steps(counters, step_s)
    keys = ["bucket", "host", "nic"]
    if steps.empty:
        wide = pd.DataFrame(columns=keys + ["seconds"])
    else:
        wide = steps.pivot_table(index=keys, columns="field", values="delta", aggfunc="sum").reset_index()
        seconds = steps.groupby(keys, sort=False)["seconds"].max().rename("seconds").reset_index()
        wide = wide.merge(seconds, on=keys, how="left")
    gauge = frame[frame["field"] == LINK_UP]
    if not gauge.empty:
        down = gauge.assign(bucket=pd.to_datetime(gauge["bucket"], utc=True))
        down = down.assign(gauge_down=(down["min"].astype(float) < 0.5).astype(float))[keys + ["gauge_down"]]
        wide = wide.merge(down, on=keys, how="outer") if len(wide) else down.assign(seconds=np.nan)
    for name in NIC_COUNTERS:
        if name not in wide:
            wide[name] = np.nan
    seconds = wide["seconds"].astype(float).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        per_s = lambda name: np.where(seconds > 0, wide[name].astype(float).to_numpy() / seconds, np.nan)  # noqa: E731
        tx_packets = wide[TX_PACKETS].astype(float).to_numpy()
        retries = wide[RETRIES].astype(float).to_numpy()
        fraction = np.where(tx_packets > 0, retries / tx_packets, np.nan)
    link_down = wide[LINK_DOWN].astype(float)
    if "gauge_down" in wide:
        link_down = link_down.fillna(wide["gauge_down"].astype(float))
    out = pd.DataFrame({"bucket": wide["bucket"], "host": wide["host"].astype(str), "nic": wide["nic"].astype(str),
                        "seconds": seconds, "tx_bytes_s": per_s(TX_BYTES), "rx_bytes_s": per_s(RX_BYTES),
                        "tx_packets_s": per_s(TX_PACKETS), "rx_packets_s": per_s(RX_PACKETS), "retries_s": per_s(RETRIES),
                        "retry_fraction": fraction, "link_down": link_down.to_numpy()})
    # a driver reload restarts every counter of the NIC at once: count it once (the most of any one counter)
    resets = (steps.groupby(["host", "nic", "field"])[["resets", "wraps"]].sum().groupby(level=["host", "nic"]).max()
              if not steps.empty else None)
    out.attrs["events"] = _Shared({} if resets is None else {
        (str(h), str(n)): {"resets": int(r), "wraps": int(w)} for (h, n), (r, w) in resets.iterrows()})
    return out.sort_values(["host", "nic", "bucket"], kind="stable").reset_index(drop=True)


class _Shared(dict):
    """Read-only data kept in a frame's ``attrs``: pandas deep-copies attrs into every frame derived from it
    (each sort, filter, copy), which for one entry per NIC cost seconds per job; this one is shared instead."""

    def __deepcopy__(self, memo):
        return self


def nic_totals(rates: pd.DataFrame) -> pd.DataFrame:
    """Per NIC over the window (``TOTAL_COLUMNS``): what it moved, its retry fraction, link-down events, its
    mean rates over the seconds it was seen, the resets and wraps its counters went through."""
    if rates is None or rates.empty:
        return pd.DataFrame(columns=TOTAL_COLUMNS)
    work = rates.copy()
    seconds = work["seconds"].fillna(0.0)
    for name, rate in (("tx_bytes", "tx_bytes_s"), ("rx_bytes", "rx_bytes_s"), ("tx_packets", "tx_packets_s"),
                       ("rx_packets", "rx_packets_s"), ("retries", "retries_s")):
        work[name] = work[rate].fillna(0.0) * seconds
    work["seconds"] = seconds
    sums = work.groupby(["host", "nic"], sort=True)[["seconds", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets",
                                                     "retries", "link_down"]].sum(min_count=1).reset_index()
    sums["link_down"] = sums["link_down"].fillna(0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sums["retry_fraction"] = np.where(sums["tx_packets"] > 0, sums["retries"] / sums["tx_packets"], np.nan)
        sums["tx_bytes_s"] = np.where(sums["seconds"] > 0, sums["tx_bytes"] / sums["seconds"], np.nan)
        sums["rx_bytes_s"] = np.where(sums["seconds"] > 0, sums["rx_bytes"] / sums["seconds"], np.nan)
    events = rates.attrs.get("events", {})
    sums["resets"] = [events.get((h, n), {}).get("resets", 0) for h, n in zip(sums["host"], sums["nic"])]
    sums["wraps"] = [events.get((h, n), {}).get("wraps", 0) for h, n in zip(sums["host"], sums["nic"])]
    return sums[TOTAL_COLUMNS]


# ---------------------------------------------------------------------------------------------
# Outliers


@dataclass
class NicOutlier:
    host: str
    nic: str
    kinds: list  # "retries", "link", "throughput": the first is the main one
    reason: str  # "hsn2 on nid000473: 31 % of packets retried, its peers < 1 %"
    retry_fraction: float | None
    peers_retry_fraction: float | None  # the peers' median
    peers_retry_max: float | None  # the largest of the peers that are not outliers
    z: float | None
    tx_packets: float
    retries: float
    tx_bytes: float
    rx_bytes: float
    link_down: float
    peers_link_down: float | None = None
    traffic_ratio: float | None = None  # its traffic / the peers' median while they were busy
    peers: int = 0  # NICs compared with
    counters: dict = field(default_factory=dict)  # what the sentence is built on, for the API

    def as_dict(self) -> dict:
        return asdict(self)


def percent_words(fraction: float | None) -> str:
    """31 %, 2.4 %, 0.3 %: two significant digits up to 10 %, whole numbers above."""
    if fraction is None or not np.isfinite(fraction):
        return "–"
    value = 100 * fraction
    if value >= 9.95:
        return f"{value:.0f} %"
    if value >= 0.995:
        return f"{value:.1f} %"
    return f"{value:.2f} %" if value >= 0.01 else "0 %"


def _peers_words(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if not values.size:
        return ""
    top = float(values.max())
    if top < 0.01:
        return "its peers < 1 %"
    return f"its peers {percent_words(float(np.median(values)))} (median, at most {percent_words(top)})"


def _robust_scale(values: np.ndarray, floor: float) -> tuple[float, float]:
    middle = float(np.median(values))
    mad = float(np.median(np.abs(values - middle)))
    return middle, max(mad / MAD_TO_SIGMA, floor)


def _low_traffic(rates: pd.DataFrame, names: list[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """NICs that moved far less than their peers' median in the buckets where the peers were busy."""
    if rates.empty or len(names) < MIN_PEERS:
        return {}
    traffic = rates.assign(traffic=rates["tx_bytes_s"].astype(float) + rates["rx_bytes_s"].astype(float))
    grid = traffic.pivot_table(index=["host", "nic"], columns="bucket", values="traffic", aggfunc="sum")
    grid = grid.reindex(pd.MultiIndex.from_tuples(names, names=["host", "nic"]))
    values = grid.to_numpy(float)
    if values.shape[1] == 0:
        return {}
    known = np.isfinite(values).sum(axis=0)
    with np.errstate(all="ignore"):
        ordered = np.sort(np.where(np.isfinite(values), values, np.inf), axis=0)
        middle = np.array([np.median(ordered[:k, c]) if k else np.nan for c, k in enumerate(known)])
    busiest = np.nanmax(middle) if np.isfinite(middle).any() else np.nan
    if not np.isfinite(busiest) or busiest <= 0:
        return {}
    busy = (known >= MIN_PEERS) & (middle >= BUSY_SHARE * busiest)
    if busy.sum() < MIN_BUSY_BUCKETS:
        return {}
    out = {}
    with np.errstate(all="ignore"):
        ratio = values[:, busy] / middle[busy][None, :]
    for row, name in enumerate(names):
        seen = np.isfinite(ratio[row])
        if seen.sum() < MIN_BUSY_BUCKETS:
            continue
        low = ratio[row][seen] < LOW_TRAFFIC
        if low.mean() >= LOW_PERSIST:
            out[name] = {"ratio": float(np.median(ratio[row][seen])), "buckets": int(low.sum()),
                         "busy_buckets": int(seen.sum()),
                         "traffic_s": float(np.nanmedian(values[row, busy])), "peers_s": float(np.nanmedian(middle[busy]))}
    return out


def rate_words(bytes_s: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bytes_s) >= scale:
            return f"{bytes_s / scale:.2g} {unit}" if bytes_s / scale < 10 else f"{bytes_s / scale:.0f} {unit}"
    return f"{bytes_s:.0f} B/s"


def nic_outliers(rates: pd.DataFrame, totals: pd.DataFrame | None = None) -> list[NicOutlier]:
    """The NICs of a job that stand out from the others (its peers: every other NIC of the job that reported),
    worst first. ``rates`` from :func:`nic_rates`; ``totals`` from :func:`nic_totals` (computed when None)."""
    if rates is None or rates.empty:
        return []
    totals = nic_totals(rates) if totals is None else totals
    if totals.empty:
        return []
    names = list(zip(totals["host"].astype(str), totals["nic"].astype(str)))
    fraction = totals["retry_fraction"].astype(float).to_numpy()
    packets = totals["tx_packets"].astype(float).to_numpy()
    fraction = np.where(packets >= MIN_PACKETS, fraction, np.nan)
    links = totals["link_down"].astype(float).fillna(0.0).to_numpy()
    enough = len(names) >= MIN_PEERS
    flagged: dict[int, list[str]] = {}
    z = np.full(len(names), np.nan)
    known = np.isfinite(fraction)
    if known.sum() >= MIN_PEERS:
        middle, scale = _robust_scale(fraction[known], RETRY_FLOOR)
        z = (fraction - middle) / scale
        retry_out = known & (z > Z_THRESHOLD) & (fraction >= RETRY_MIN) & (fraction >= RETRY_FACTOR * middle)
    else:
        retry_out = known & (fraction >= RETRY_ALARM)
    for row in np.flatnonzero(retry_out):
        flagged.setdefault(int(row), []).append("retries")
    if enough:
        flapping = (links >= 1) & (float(np.median(links)) < 0.5)  # peers (most NICs) never went down
    else:
        flapping = links >= 1
    for row in np.flatnonzero(flapping):
        flagged.setdefault(int(row), []).append("link")
    low = _low_traffic(rates, names)
    for name, _facts in low.items():
        flagged.setdefault(names.index(name), []).append("throughput")
    if not flagged:
        return []
    peers_rows = np.array([row not in flagged for row in range(len(names))])
    peer_fractions = fraction[peers_rows]
    peers_median = float(np.nanmedian(peer_fractions)) if np.isfinite(peer_fractions).any() else None
    peers_max = float(np.nanmax(peer_fractions)) if np.isfinite(peer_fractions).any() else None
    peers_links = float(np.median(links[peers_rows])) if peers_rows.any() else None
    out = []
    for row, kinds in flagged.items():
        host, nic = names[row]
        record = totals.iloc[row]
        parts = []
        if "retries" in kinds:
            words = f"{percent_words(fraction[row])} of packets retried"
            peers = _peers_words(peer_fractions) if enough else "too few NICs in the job to compare with peers"
            parts.append(words + (f", {peers}" if peers else ""))
        if "link" in kinds:
            times = int(round(links[row]))
            parts.append(f"link went down {times} time{'s' * (times != 1)}"
                         + (", its peers never" if enough and peers_links is not None and peers_links < 0.5 else ""))
        if "throughput" in kinds:
            facts = low[(host, nic)]
            parts.append(f"moved {percent_words(1 - facts['ratio'])} less than its peers while they were busy "
                         f"({rate_words(facts['traffic_s'])} vs {rate_words(facts['peers_s'])})")
        counters = {"tx_packets": float(record["tx_packets"]), "retries": float(record["retries"]),
                    "tx_bytes": float(record["tx_bytes"]), "rx_bytes": float(record["rx_bytes"]),
                    "link_down": float(links[row]), "seconds": float(record["seconds"])}
        out.append(NicOutlier(
            host=host, nic=nic, kinds=kinds, reason=f"{nic} on {host}: " + "; ".join(parts),
            retry_fraction=_finite(fraction[row]), peers_retry_fraction=peers_median, peers_retry_max=peers_max,
            z=_finite(round(float(z[row]), 2)) if np.isfinite(z[row]) else None,
            tx_packets=counters["tx_packets"], retries=counters["retries"], tx_bytes=counters["tx_bytes"],
            rx_bytes=counters["rx_bytes"], link_down=counters["link_down"], peers_link_down=peers_links,
            traffic_ratio=low[(host, nic)]["ratio"] if (host, nic) in low else None, peers=len(names) - 1,
            counters=counters))
    order = {"retries": 0, "link": 1, "throughput": 2}
    out.sort(key=lambda o: (order[o.kinds[0]], -(o.retry_fraction or 0), -o.link_down, o.traffic_ratio or 1, o.host, o.nic))
    return out


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def outliers_by_host(outliers: list[NicOutlier]) -> dict[str, list[dict]]:
    """``{host: [outlier as dict, ...]}``: the plain argument the straggler finder takes."""
    out: dict[str, list[dict]] = {}
    for item in outliers:
        out.setdefault(item.host, []).append(item.as_dict())
    return out
