"""Reads of the network app: a job's NIC counters from the telemetry store, turned into rates, totals, outliers,
heatmaps in the GPU heatmaps' row orders and traffic per dragonfly group.

Everything is computed from the store's ``aggregate_net`` buckets (``apps.telemetry.nic_analysis``); the result
of one read (:func:`job_network`) is cached under the job's state and the window, a running job's for
``LIVE_TTL`` seconds only (its counters keep arriving).
"""
from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np
import pandas as pd
from django.core.cache import cache
from django.utils import timezone

from apps.core import heatmaps
from apps.saturation.models import JobSaturation
from apps.saturation.products import heatmap_order
from apps.telemetry.backends.base import TelemetryUnavailable, TierError
from apps.telemetry.nic_analysis import LINK_UP, NIC_COUNTERS, nic_outliers, nic_rates, nic_totals
from apps.telemetry.products import choose_step
from apps.telemetry.selectors import readable_step
from apps.telemetry.store import telemetry_store

LIVE_TTL = 30
DONE_TTL = 3600
MAX_BUCKETS = 240  # per NIC over the job: the heatmap's full-width columns
MIN_STEP = 60  # rates need two samples in a bucket or across two
SORTS = ("rank", "node", "pp", "dp", "group")
SORT_WORDS = {"rank": "rank", "node": "node order", "pp": "pipeline stage", "dp": "data-parallel replica",
              "group": "dragonfly group"}
# What a heatmap can show: (the rates frame's column(s), title, unit, scale factor, heatmap quantity)
METRICS = {
    "traffic": (("tx_bytes_s", "rx_bytes_s"), "NIC traffic in + out", "GB/s", 1e-9, heatmaps.Quantity("data", heatmaps.LOW, "GB/s")),
    "tx": (("tx_bytes_s",), "NIC traffic out", "GB/s", 1e-9, heatmaps.Quantity("data", heatmaps.LOW, "GB/s")),
    "rx": (("rx_bytes_s",), "NIC traffic in", "GB/s", 1e-9, heatmaps.Quantity("data", heatmaps.LOW, "GB/s")),
    "retries": (("retry_fraction",), "packets retried", "%", 100.0, heatmaps.Quantity("percent", heatmaps.HIGH, "%")),
}
HOW_TO_COLLECT = ("No NIC counters were received for this job. The collector agent (deploy/collector/) reads each node's "
                  "Slingshot NICs with its Cassini reader — /sys/class/cxi/cxiN/device/telemetry/ and the retry handler's "
                  "/var/run/cxi/cxiN/ — when started with NIC collection on; or send them to the samples API with a \"nic\" "
                  "key instead of \"gpu\" ({\"ts\", \"host\", \"nic\": \"hsn2\", \"field\": \"nic_tx_bytes\", \"value\"}, "
                  "cumulative as the driver reports them).")


def job_window(job, start=None, end=None):
    """[start, end) of the job's run (up to now while it runs), narrowed to ``start``/``end`` when given."""
    now = timezone.now()
    first = job.start_time or now
    last = job.end_time or now
    if start is not None:
        first = max(first, start)
    if end is not None:
        last = min(last, end)
    return first, max(last, first)


def step_for(job) -> int:
    """The bucket width of the job's NIC rates: at most MAX_BUCKETS over its run, and never finer than the store's tier
    that still holds its start (1-minute rollups once its raw samples are past their retention)."""
    first, last = job_window(job)
    step = max(MIN_STEP, choose_step(max((last - first).total_seconds(), 1.0), max_buckets=MAX_BUCKETS))
    return readable_step(first, step) or step


def _key(job) -> str:
    parts = (job.pk, job.state, job.start_time, job.end_time, tuple(job.node_list or ()))
    saturation = JobSaturation.objects.filter(job=job).values_list("computed", flat=True).first()
    return "network:job:" + hashlib.sha256(repr((*parts, saturation)).encode()).hexdigest()[:24]


def job_network(job) -> dict:
    """The job's NIC data over its run (cached): ``rates`` (nic_analysis.RATE_COLUMNS), ``totals``, ``outliers``
    (dicts), ``step_s``, ``window``, ``reporting`` (NICs that sent counters) and ``error`` (the store's
    complaint, when it could not be read)."""
    key = _key(job)
    found = cache.get(key)
    if found is None:
        found = _read(job)
        cache.set(key, found, LIVE_TTL if job.is_active or job.end_time is None else DONE_TTL)
    return found


def _read(job) -> dict:
    step = step_for(job)
    first, last = job_window(job)
    out = {"step_s": step, "window": (first, last), "rates": pd.DataFrame(), "totals": pd.DataFrame(), "outliers": [],
           "reporting": 0, "error": ""}
    hosts = list(job.node_list or [])
    if not hosts or job.start_time is None:
        return out
    try:
        frame = telemetry_store().aggregate_net(job.cluster.name, step, hosts=hosts, fields=[*NIC_COUNTERS, LINK_UP],
                                                start=first, end=last + timedelta(seconds=1))
    except (TelemetryUnavailable, TierError) as exc:
        out["error"] = str(exc)
        return out
    rates = nic_rates(frame, step)
    totals = nic_totals(rates)
    out.update(rates=rates, totals=totals, outliers=[item.as_dict() for item in nic_outliers(rates, totals)],
               reporting=int(len(totals)))
    return out


# ---------------------------------------------------------------------------------------------
# Rows: NIC k of a node beside that node's GPU k, in the GPU heatmaps' orders


def _lane(nic: str) -> int | None:
    return int(nic[3:]) if nic.startswith("hsn") and nic[3:].isdigit() else None


def gpu_places(job) -> dict:
    """(host, gpu) -> the GPU's row of the saturation product (rank, pp, tp, dp, switch, group), when scored."""
    per_gpu = JobSaturation.objects.filter(job=job).values_list("per_gpu", flat=True).first() or []
    return {(row.get("host"), row.get("gpu")): row for row in per_gpu if isinstance(row, dict)}


def nic_rows(job, names: list[tuple[str, str]]) -> list[dict]:
    """One row per (host, nic) with the heatmaps' ROW_KEYS: GPU k's rank, stage, replica, and the NIC's switch
    and group (the topology's, else the GPU's)."""
    places = gpu_places(job)
    index = None
    try:
        from apps.topology.selectors import topology_index_current

        index = topology_index_current()
    except Exception:  # noqa: BLE001 - no topology loaded: rows without switch and group
        index = None
    rows = []
    for host, nic in names:
        lane = _lane(nic)
        gpu = places.get((host, lane), {})
        place = index.nic_of(host, lane) if index is not None and lane is not None else None
        rows.append({"host": host, "nic": nic, "gpu": lane, "rank": gpu.get("rank"), "pp": gpu.get("pp"),
                     "dp": gpu.get("dp"), "tp": gpu.get("tp"),
                     "group": place.group if place else gpu.get("group"),
                     "switch": f"{place.group}.{place.switch}" if place else gpu.get("switch")})
    return rows


def order_rows(rows: list[dict], sort: str, job) -> list[int]:
    """The display order: the GPU heatmaps' (``saturation.products.heatmap_order``), node order by the job's
    node list, NIC index within a node."""
    position = {host: i for i, host in enumerate(job.node_list or [])}
    base = sorted(range(len(rows)), key=lambda i: (position.get(rows[i]["host"], 10**9), rows[i]["host"], rows[i]["nic"]))
    ranked = [rows[i] for i in base]
    return [base[i] for i in heatmap_order(ranked, sort if sort in SORTS else "node")]


def matrix(rates: pd.DataFrame, names: list[tuple[str, str]], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(values per NIC × bucket in the metric's unit, bucket starts as datetime64[ns])."""
    columns, _title, _unit, factor, _quantity = METRICS[metric]
    if rates.empty:
        return np.zeros((len(names), 0)), np.array([], dtype="datetime64[ns]")
    work = rates.assign(value=rates[list(columns)].astype(float).sum(axis=1, min_count=len(columns)) * factor)
    grid = work.pivot_table(index=["host", "nic"], columns="bucket", values="value", aggfunc="first", dropna=False)
    grid = grid.reindex(pd.MultiIndex.from_tuples(names, names=["host", "nic"]))
    starts = pd.DatetimeIndex(grid.columns).tz_convert("UTC").tz_localize(None).to_numpy("datetime64[ns]")
    return grid.to_numpy(float), starts


def heatmap(job, *, metric: str = "traffic", mode: str = "value", sort: str = "node", bins: int = 300, start=None, end=None,
            rows_mode: str = "auto") -> dict:
    """The compact heatmap answer (``apps/core/heatmaps.compact``) of one NIC metric, rows in the chosen order,
    for the job page's heatmap script."""
    data = job_network(job)
    totals = data["totals"]
    names = list(zip(totals["host"].astype(str), totals["nic"].astype(str))) if not totals.empty else []
    values, starts = matrix(data["rates"], names, metric)
    starts, (values,) = heatmaps.regular_grid(starts, float(data["step_s"]), values)  # missing buckets: no data
    rows = nic_rows(job, names)
    order = order_rows(rows, sort, job) if rows else []
    _columns, title, unit, _factor, quantity = METRICS[metric]
    binned = heatmaps.Binned(values, starts, float(data["step_s"]))
    answer = heatmaps.compact(binned, rows, quantity=quantity, facts=heatmaps.ModelFacts(), mode=mode,
                              order=np.asarray(order, dtype=np.int64), sort=sort if sort in SORTS else "node", bins=bins,
                              start=start, end=end, rows_mode=rows_mode)
    if not answer["aggregated_by"]:
        for row, i in zip(answer["rows"], order):
            row["nic"] = rows[i]["nic"]
            row["label"] = (f"r{row['rank']} " if row.get("rank") is not None else "") + f"{rows[i]['host']} {rows[i]['nic']}"
    else:
        for row in answer["rows"]:
            row["label"] = row["label"].replace("GPUs)", "NICs)").replace("GPU)", "NIC)")
    answer.update(metric=metric, title=title, unit=unit, peers="all the job's NICs")
    return answer


def group_traffic(job, totals: pd.DataFrame) -> list[dict]:
    """Per dragonfly group: the job's NICs there and what they sent and received (mean GB/s over the run)."""
    if totals.empty:
        return []
    rows = nic_rows(job, list(zip(totals["host"].astype(str), totals["nic"].astype(str))))
    work = totals.assign(group=[row["group"] for row in rows])
    out = []
    for group, part in work.groupby(work["group"].fillna(-1), sort=True):
        out.append({"group": None if group == -1 else int(group), "nodes": int(part["host"].nunique()), "nics": int(len(part)),
                    "tx_bytes_s": float(part["tx_bytes_s"].fillna(0).sum()), "rx_bytes_s": float(part["rx_bytes_s"].fillna(0).sum()),
                    "tx_bytes": float(part["tx_bytes"].fillna(0).sum()), "rx_bytes": float(part["rx_bytes"].fillna(0).sum())})
    total = sum(item["tx_bytes"] for item in out) or 1.0
    for item in out:
        item["share"] = item["tx_bytes"] / total
    return out


def straggler_hosts(job) -> set[str]:
    """Hosts the saturation scoring found lagging (node or GPU findings)."""
    items = JobSaturation.objects.filter(job=job).values_list("stragglers", flat=True).first() or []
    return {item.get("host") for item in items if isinstance(item, dict) and item.get("level") in ("node", "gpu")}


# ---------------------------------------------------------------------------------------------
# The API's answer

SERIES = ("tx_bytes_s", "rx_bytes_s", "tx_packets_s", "rx_packets_s", "retry_fraction", "link_down")
GROUPS_NOTE = ("Per dragonfly group, what the job's NICs there sent and received. A NIC counts all its traffic, to its own group "
               "and to others alike: which global link carried it is not in the NIC counters (the switches' port counters, "
               "imported from the fabric manager, give each link's load of all jobs together).")


def _number(value, digits: int = 6):
    if value is None:
        return None
    value = float(value)
    return float(f"{value:.{digits}g}") if np.isfinite(value) else None


def network_body(job, *, start=None, end=None, series: bool = True, verdict=None) -> dict:
    """The network endpoint's answer (see ``api/views.NetworkView``); ``verdict(job, data)`` gives the sentence."""
    data = job_network(job)
    first, last = data["window"]
    body = {"job": f"{job.cluster.name}/{job.job_id}", "window": {"start": first.isoformat(), "end": last.isoformat()},
            "step_seconds": data["step_s"], "reporting": data["reporting"], "expected": len(job.node_list or []) * 4,
            "verdict": verdict(job, data) if verdict else "", "findings": data["outliers"], "nics": [], "times": [],
            "series": {}, "groups": [], "groups_note": GROUPS_NOTE, "error": data["error"] or None,
            "how_to": HOW_TO_COLLECT if not data["reporting"] and not data["error"] else None}
    totals = data["totals"]
    if totals.empty:
        return body
    names = list(zip(totals["host"].astype(str), totals["nic"].astype(str)))
    rows = nic_rows(job, names)
    order = order_rows(rows, "node", job)
    for i in order:
        record = totals.iloc[i]
        body["nics"].append({**rows[i], **{column: _number(record[column]) for column in
                                           ("seconds", "tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "retries",
                                            "retry_fraction", "link_down", "tx_bytes_s", "rx_bytes_s")},
                             "resets": int(record["resets"]), "wraps": int(record["wraps"])})
    body["groups"] = group_traffic(job, totals)
    if not series:
        return body
    rates = data["rates"]
    if start is not None or end is not None:
        buckets = pd.to_datetime(rates["bucket"], utc=True)
        keep = np.ones(len(rates), dtype=bool)
        if start is not None:
            keep &= (buckets >= pd.Timestamp(start)).to_numpy()
        if end is not None:
            keep &= (buckets < pd.Timestamp(end)).to_numpy()
        rates = rates[keep]
    if rates.empty:
        return body
    grid = {}
    for column in SERIES:
        table = rates.pivot_table(index=["host", "nic"], columns="bucket", values=column, aggfunc="first", dropna=False)
        grid[column] = table.reindex(pd.MultiIndex.from_tuples([names[i] for i in order], names=["host", "nic"]))
    columns = list(grid[SERIES[0]].columns)
    body["times"] = [pd.Timestamp(moment).isoformat().replace("+00:00", "Z") for moment in columns]
    for column in SERIES:
        values = grid[column].reindex(columns=columns).to_numpy(float)
        body["series"][column] = [[_number(v, 5) for v in row] for row in values]
    return body
