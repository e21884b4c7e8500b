"""Reads of the telemetry app: which jobs a batch of samples reached (ingestion's host map), and a series of
samples or bucket statistics from the store for the API.

Writes live in :mod:`apps.telemetry.services`; the transport (``api/views.py``) validates parameters and
calls one of each.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.utils import timezone

from apps.jobs.models import JobStateChoices

from .backends.base import DEFAULT_STATS, HOST_COLUMNS, Query
from .choices import JobTelemetryStatusChoices
from .models import JobTelemetry
from .products import JobCube, choose_step
from .store import telemetry_store

# Samples of a job that ended this long ago still refresh its products (collectors flush after the end).
ENDED_RECENTLY = timedelta(hours=1)

# -- ingestion: which jobs a batch reached --------------------------------------------------------------

RUNNING_STATES = (JobStateChoices.RUNNING, JobStateChoices.COMPLETING, JobStateChoices.SUSPENDED)
_host_maps: dict[str, tuple[float, dict]] = {}
_host_maps_lock = threading.Lock()


def host_map_seconds() -> float:
    """How long a process reuses its map of host -> running jobs (default 10 s, ``JOB_REFRESH_HOST_MAP_SECONDS``):
    a job that starts is found by batches at most this much later."""
    return float(settings.JOB_REFRESH_HOST_MAP_SECONDS)


def forget_host_maps() -> None:
    with _host_maps_lock:
        _host_maps.clear()


def _host_map(cluster: str) -> dict[str, list[tuple[int, datetime, datetime | None]]]:
    """host -> [(job pk, start, end)] of the cluster's running jobs and of those that ended within the last
    hour (found through their telemetry record's window, an indexed column: the jobs table has no index on
    end times). Two indexed queries, then kept for :func:`host_map_seconds` in this process."""
    from apps.jobs.models import Job

    now = time.monotonic()
    with _host_maps_lock:
        cached = _host_maps.get(cluster)
        if cached and cached[0] > now:
            return cached[1]
    moment = timezone.now()
    columns = ("pk", "node_list", "start_time", "end_time")
    rows = list(Job.objects.filter(cluster__name=cluster, state__in=RUNNING_STATES, start_time__isnull=False)
                .values_list(*columns))
    ended = (JobTelemetry.objects.filter(window_end__gte=moment - ENDED_RECENTLY - timedelta(hours=1),
                                         job__cluster__name=cluster, job__end_time__gte=moment - ENDED_RECENTLY,
                                         job__start_time__isnull=False)
             .values_list(*(f"job__{c}" if c != "pk" else "job_id" for c in columns)))
    seen = {row[0] for row in rows}
    rows += [row for row in ended if row[0] not in seen]
    mapping: dict[str, list] = {}
    for pk, nodes, start, end in rows:
        for host in nodes or ():
            mapping.setdefault(str(host), []).append((pk, start, end))
    with _host_maps_lock:
        _host_maps[cluster] = (now + host_map_seconds(), mapping)
    return mapping


def jobs_touched(frame: pd.DataFrame) -> dict[int, tuple[datetime, datetime]]:
    """{job pk: (first, last sample time)} for the jobs whose nodes and run time the canonical ``frame``
    covers (only the samples inside each job's run time count)."""
    if frame is None or not len(frame):
        return {}
    spans = frame.groupby(["cluster", "host"], observed=True, sort=False)["ts"].agg(["min", "max"])
    touched: dict[int, tuple[datetime, datetime]] = {}
    for (cluster, host), low, high in zip(spans.index, spans["min"], spans["max"]):
        for pk, start, end in _host_map(str(cluster)).get(str(host), ()):
            if high < start or (end is not None and low > end):
                continue
            first, last = low, high
            if low < start or (end is not None and high > end):  # the host ran something else too: exact times
                mine = frame["ts"][(frame["cluster"] == cluster) & (frame["host"] == host) & (frame["ts"] >= start)
                                   & ((frame["ts"] <= end) if end is not None else True)]
                if mine.empty:
                    continue
                first, last = mine.min(), mine.max()
            first, last = pd.Timestamp(first).to_pydatetime(), pd.Timestamp(last).to_pydatetime()
            if pk in touched:
                first, last = min(first, touched[pk][0]), max(last, touched[pk][1])
            touched[pk] = (first, last)
    return touched


# -- the series API --------------------------------------------------------------------------------------

def job_series_scope(job, *, hosts, start: datetime | None, end: datetime | None, now: datetime | None = None):
    """(hosts, start, end) of a series read for ``job``: the hosts asked for among the job's nodes (all of them
    when none is asked, none when no node asked for is the job's: never another job's node), and the window
    asked for within the job's run time (``Job.run_window``; from its start, to its end or now when not given)."""
    now = now or timezone.now()
    job_hosts = list(job.node_list or ())
    allowed = set(job_hosts)
    chosen = tuple(host for host in (hosts or job_hosts) if host in allowed)
    run_start, run_end = job.run_window(now, from_submit=True, open_end=True)
    start = max(start, run_start) if start else run_start
    end = min(end, run_end) if end and run_end else (end or run_end or now)
    return chosen, start, end


def read_series(query: Query, step: int | None = None, stats=None) -> pd.DataFrame:
    """Raw samples of ``query``, or per-bucket ``stats`` (default count/mean/min/max) when ``step`` is given.
    The store's TelemetryUnavailable propagates."""
    store = telemetry_store()
    return store.aggregate(query, step, tuple(stats or DEFAULT_STATS)) if step else store.read(query)


# -- retention tiers (issue 40) ---------------------------------------------------------------------------------------

def readable_step(start: datetime, step: int) -> int | None:
    """The finest step a read of the configured store from ``start`` can be answered at, never finer than ``step``:
    ``step`` while raw samples hold ``start``, else a multiple of the rollup tier's resolution; None when nothing of
    ``start`` is kept (``retention.Retention.step_for``)."""
    from .backends.base import TelemetryUnavailable

    try:
        store = telemetry_store()
    except TelemetryUnavailable:  # the read that follows says so where its caller handles it
        return int(step)
    return store.retention.step_for(start, store.now(), int(step))


def job_retention(job, *, store=None, now: datetime | None = None) -> dict | None:
    """What the store still holds of ``job`` when its raw samples are (partly) past their retention; None while they
    are all kept. {"raw_expired_on": when the first raw samples went, "whole": all of them, "tier": the finest tier
    holding its start ("1m", "10m", None: nothing), "tier_words", "retention": the store's tiers in words,
    "showing": "product" (the cube built from raw samples, kept), "rollups" (a cube built from rollups) or "nothing",
    "words": the sentence the job page shows}."""
    from .retention import TIER_WORDS

    if job.start_time is None:
        return None
    store = store or telemetry_store()
    now = now or store.now()
    retention = store.retention
    raw_horizon = retention.horizon("raw", now)
    if job.start_time >= raw_horizon:
        return None
    end = job.end_time or now
    whole = end <= raw_horizon
    kept_for = timedelta(days=retention.days("raw"))
    expired_on = (end if whole else job.start_time) + kept_for
    tier = retention.tier_at(job.start_time, now)
    record = JobTelemetry.objects.filter(job=job).only("status", "materialized", "step_seconds").first()
    ready = record is not None and record.status == JobTelemetryStatusChoices.STATUS_READY
    # a cube built after the job's first raw samples went, or in wider buckets than its duration calls for, was built
    # from rollups (the demo writes its history past the raw horizon: a cube of the right width, built from rollups)
    from_rollups = ready and ((record.step_seconds or 0) > choose_step((end - job.start_time).total_seconds())
                              or (record.materialized is not None and record.materialized >= job.start_time + kept_for))
    showing = "nothing" if not ready else "rollups" if from_rollups else "product"
    if showing == "rollups":
        tier = "1m" if record.step_seconds % 600 else "10m"
    what = ("Raw samples of this job expired on " + f"{expired_on:%Y-%m-%d}" if whole else
            f"Raw samples of this job from before {raw_horizon:%Y-%m-%d %H:%M} UTC have expired")
    if showing == "product":
        shown = (f"the figures show the product built from them on {record.materialized:%Y-%m-%d %H:%M} UTC "
                 f"({record.step_seconds} s buckets), kept as it was")
    elif showing == "rollups":
        shown = (f"the figures show {TIER_WORDS[tier]} ({record.step_seconds} s buckets): means, minima and maxima per "
                 "bucket, no single samples or percentiles")
    elif tier:
        shown = f"its {TIER_WORDS[tier]} are still kept; no figure has been built from them yet"
    else:
        shown = "nothing of its telemetry is kept any longer, so no GPU figure can be drawn"
    return {"raw_expired_on": expired_on, "whole": whole, "tier": tier, "tier_words": TIER_WORDS.get(tier, ""),
            "retention": retention.describe(), "showing": showing,
            "words": f"{what} (this store keeps {retention.describe()}): {shown}."}


def job_cube(job, fields=None):
    """The job's materialised telemetry cube (``products.JobCube``), with ``fields`` only those fields, or None when
    the job has no ready product (not read from the store yet, or its file is gone until the next refresh)."""
    record = JobTelemetry.objects.filter(job=job).values("status", "product").first()
    if record is None or record["status"] != JobTelemetryStatusChoices.STATUS_READY or not record["product"]:
        return None
    path = Path(settings.DATA_DIR) / record["product"]
    if not path.exists():
        return None
    return JobCube.load(path, fields)


# -- versions (facts: apps/telemetry/versions.py) -------------------------------------------------------

VERSION_COLUMNS = ("host", "gpu", "key", "value", "first_seen", "last_seen", "partition", "source")


def versions_current(hosts=None, *, at=None, keys=None) -> list[dict]:
    """Per host, GPU and key the value seen last (as of ``at``: facts first seen after it do not count), as dicts
    of ``VERSION_COLUMNS``. ``hosts`` None: the whole fleet."""
    from .models import VersionFact

    queryset = VersionFact.objects.all()
    if hosts is not None:
        queryset = queryset.filter(host__in=list(hosts))
    if at is not None:
        queryset = queryset.filter(first_seen__lte=at)
    if keys is not None:
        queryset = queryset.filter(key__in=list(keys))
    latest: dict[tuple, dict] = {}
    for row in queryset.order_by().values(*VERSION_COLUMNS):
        slot = (row["host"], row["gpu"], row["key"])
        if slot not in latest or row["last_seen"] > latest[slot]["last_seen"]:
            latest[slot] = row
    return sorted(latest.values(), key=lambda row: (row["host"], row["key"], row["gpu"]))


def node_version_history(host: str) -> list[dict]:
    """Every fact of ``host``, newest first: its versions over time."""
    from .models import VersionFact

    return list(VersionFact.objects.filter(host=host).order_by("key", "gpu", "-last_seen").values(*VERSION_COLUMNS))


def job_versions(job) -> dict:
    """The versions of the job's nodes as of its end (or now), the values per key and the minorities
    (``versions.consistency``): what the first screen and its API say."""
    from . import versions

    hosts = list(job.node_list or ())
    rows = versions_current(hosts, at=job.end_time or None) if hosts else []
    values = versions.node_values(rows)
    minorities = versions.consistency(values)
    keys: dict[str, dict[str, int]] = {}
    for row in values.values():
        for key, value in row.items():
            keys.setdefault(key, {}).setdefault(value, 0)
            keys[key][value] += 1
    return {"nodes": len(hosts), "known": len(values), "keys": keys, "values": values,
            "minorities": [m.as_dict() for m in minorities]}


def partitions_of(hosts=None) -> dict[str, str]:
    """{host: the partition its versions were last reported from} ("" when never told)."""
    from .models import VersionFact

    queryset = VersionFact.objects.exclude(partition="")
    if hosts is not None:
        queryset = queryset.filter(host__in=list(hosts))
    return dict(queryset.order_by("last_seen").values_list("host", "partition"))


THERMAL_WINDOW = (timedelta(seconds=60), timedelta(minutes=10))  # the start of a job: after warm-up, first minutes


def job_thermal_outliers(job, now=None) -> list:
    """``thermal.outliers`` of the job's first minutes (``THERMAL_WINDOW``), from minute buckets of the store; kept in
    the cache for 10 minutes (the window does not move once it has passed). [] when the store cannot answer."""
    from django.core.cache import cache

    from . import thermal
    from .backends.base import TelemetryUnavailable, TierError

    if job.start_time is None or not job.node_list:
        return []
    now = now or timezone.now()
    start = job.start_time + THERMAL_WINDOW[0]
    end = min(job.start_time + THERMAL_WINDOW[1], job.end_time or now, now)
    if end <= start + timedelta(seconds=60):
        return []
    key = f"telemetry:thermal:{job.pk}:{start.timestamp():.0f}:{end.timestamp():.0f}"
    found = cache.get(key)
    if found is None:
        query = Query(start=start, end=end, cluster=job.cluster.name, hosts=tuple(job.node_list), fields=thermal.FIELDS)
        try:
            frame = read_series(query, readable_step(start, 60) or 60, ("mean",))
        except (TelemetryUnavailable, TierError):
            return []
        frame = frame.rename(columns={"mean": "value"}) if "mean" in frame.columns else frame
        found = [o.as_dict() for o in thermal.outliers(frame)]
        cache.set(key, found, 600)
    return found


# -- host samples (hostfields: the CPU side of the node, issue 39) ----------------------------------------------------

HOST_ROW_FIELDS = ("host_cpu_busy", "host_mem_used", "host_mem_total", "host_dataloader_cpu", "host_job_cpu")


def job_host_samples(job, fields=HOST_ROW_FIELDS, margin: timedelta = timedelta(0)) -> pd.DataFrame:
    """The host samples (``HOST_COLUMNS``) of the job's nodes over its run (± ``margin``): node and NUMA domains, GPU
    memory domains, and only this job's own steps (``job<id>.*``), never another job's on a shared node."""
    if job.start_time is None or not job.node_list:
        return pd.DataFrame(columns=HOST_COLUMNS)
    start, end = job.start_time - margin, (job.end_time or timezone.now()) + margin
    frame = telemetry_store().read_host(job.cluster.name, hosts=list(job.node_list), fields=list(fields),
                                        start=start, end=end)
    steps = frame["domain"].str.startswith("job")
    return frame[~steps | frame["domain"].str.startswith(f"job{job.job_id}.")].reset_index(drop=True)


def host_row(frame: pd.DataFrame, step: float) -> dict:
    """Per epoch-aligned bucket of ``step`` seconds, over the job's nodes: the mean CPU busy share of the nodes, the
    mean data-loader CPU share of the job's steps, the host memory used (share of the total). {"times": bucket starts
    (datetime64[ns] UTC, naive), "cpu_busy", "loader_cpu", "mem_used": arrays with NaN where unknown}."""
    if frame is None or frame.empty:
        return {"times": pd.DatetimeIndex([]).to_numpy(), "cpu_busy": [], "loader_cpu": [], "mem_used": []}
    step_ns = int(step * 1e9)
    ns = frame["ts"].astype("int64").to_numpy()
    work = frame.assign(bucket=(ns // step_ns) * step_ns)
    node = work[work["domain"] == "node"]
    steps = work[work["domain"].str.startswith("job")]
    cpu = node[node["field"] == "host_cpu_busy"].groupby("bucket")["value"].mean()
    loader = steps[steps["field"] == "host_dataloader_cpu"].groupby("bucket")["value"].mean()
    used = node[node["field"] == "host_mem_used"].groupby("bucket")["value"].sum()
    total = node[node["field"] == "host_mem_total"].groupby("bucket")["value"].sum()
    buckets = sorted(set(cpu.index) | set(loader.index) | set(used.index))
    share = (used / total).reindex(buckets) if len(total) else pd.Series(float("nan"), index=buckets)
    return {"times": pd.to_datetime(buckets, unit="ns").to_numpy(),
            "cpu_busy": cpu.reindex(buckets).to_numpy(dtype="float64"),
            "loader_cpu": loader.reindex(buckets).to_numpy(dtype="float64"),
            "mem_used": share.to_numpy(dtype="float64")}


PREFLIGHT_SPAN = timedelta(minutes=10)


def page_cache_before(job, threshold_bytes: float) -> list[dict]:
    """The job's GPUs that held ``threshold_bytes`` or more of page cache in their memory in the ``PREFLIGHT_SPAN`` before
    it started (``host_analysis.page_cache_in_gpu``; the pre-flight's fact, issue 39), cached for the job's start."""
    from django.core.cache import cache

    from . import host_analysis

    if job.start_time is None or not job.node_list:
        return []
    key = f"telemetry:page-cache-before:{job.pk}:{job.start_time.timestamp():.0f}:{threshold_bytes:.0f}"
    found = cache.get(key)
    if found is None:
        frame = telemetry_store().read_host(job.cluster.name, hosts=list(job.node_list), fields=["host_gpu_page_cache"],
                                            start=job.start_time - PREFLIGHT_SPAN, end=job.start_time)
        found = host_analysis.page_cache_in_gpu(frame, threshold_bytes, "before the job")
        cache.set(key, found, 600)
    return found


HOST_HEATMAP_ROWS = (("host_cpu_busy", "host: CPU busy"), ("host_dataloader_cpu", "host: data-loader CPU"),
                     ("host_mem_used", "host: memory used"))


def host_heatmap_rows(job, times, bin_seconds: float) -> list[dict]:
    """The host row under a job's GPU heatmap (issue 39): per heatmap bin (``times``: ISO bin starts), the mean over the
    job's nodes of their CPU busy share, of its steps' data-loader CPU share and of their host memory used (share of the
    total); [{"label", "values": [0-1 or None per bin]}], only rows with a value. DuckDB aggregates by bin."""
    if job.start_time is None or not job.node_list or not len(times) or not bin_seconds:
        return []
    starts = pd.DatetimeIndex(pd.to_datetime(list(times), utc=True))
    step = readable_step(starts[0].to_pydatetime(), max(1, int(round(bin_seconds))))
    if step is None:  # past every tier's retention
        return []
    fields = ["host_cpu_busy", "host_dataloader_cpu", "host_mem_used", "host_mem_total"]
    frame = telemetry_store().aggregate_host(job.cluster.name, step, hosts=list(job.node_list), fields=fields,
                                             start=starts[0].to_pydatetime(),
                                             end=(starts[-1] + pd.Timedelta(seconds=step)).to_pydatetime())
    if frame.empty:
        return []
    mine = frame["domain"].eq("node") | frame["domain"].str.startswith(f"job{job.job_id}.")
    frame = frame[mine]
    per = frame.groupby(["bucket", "field"])["last"]
    means, sums = per.mean().unstack("field"), per.sum().unstack("field")
    if "host_mem_used" in sums and "host_mem_total" in sums:
        means["host_mem_used"] = sums["host_mem_used"] / sums["host_mem_total"]
    # the store's buckets are epoch-aligned to the step; the heatmap's bins start where its grid does
    index = pd.DatetimeIndex(means.index).tz_convert("UTC") if pd.DatetimeIndex(means.index).tz else \
        pd.DatetimeIndex(means.index).tz_localize("UTC")
    means.index = index
    rows = []
    for field, label in HOST_HEATMAP_ROWS:
        if field not in means:
            continue
        values = means[field].reindex(starts, method="nearest", tolerance=pd.Timedelta(seconds=step / 2))
        if values.notna().any():
            rows.append({"label": label, "values": [None if pd.isna(v) else round(float(min(max(v, 0.0), 1.0)), 3)
                                                    for v in values]})
    return rows
