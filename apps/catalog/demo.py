"""Demo part: the built-in data products over the demo machine, with one coverage gap and one stale product;
and its feeder: the fleet keeps reporting while the demo lives, except the silent nodes.

* fleet telemetry for ``dcgm-device``: power and temperature of every GPU of every node that is up,
  once a minute for the last ``DEMO_FLEET_HOURS`` (loaded where a job ran; where the telemetry part
  wrote a job's own device samples the fleet stream leaves them alone). Planted: sixteen nodes of
  dragonfly group 17 that run no job stopped reporting 35 minutes ago (a coverage gap that opens an
  incident), and three nodes were silent for twelve minutes an hour ago (an exporter restart: a closed
  gap);
* ``gpu-error-counters``: the hourly health exporter sent XID and ECC counters for a day and then
  stopped two days ago (stale);
* ``slingshot-nic-counters`` is declared on an Elasticsearch index the demo does not have.

The checks run at a few moments of the last two hours, so each product has a short history and the
gap's incident opens when the nodes have been silent longer than the freshness limit.

The feeder (``fleet``, after the jobs' telemetry): every minute of the span, power and temperature of
each GPU of every node that is up and runs no demo job (those send their own samples), except the
silent nodes of group 17, which stay silent: the catalogue's checks (beat) keep finding the same gap.
Few fields for ~2,600 idle nodes, so a tick stays cheap.
"""
from datetime import timedelta

import numpy as np
import pandas as pd
from django.conf import settings
from django.db.models import Q

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part

DEMO_CLUSTER = "alps"
GAP_GROUP = 17
GAP_NODES = 16
GAP_MINUTES = 35
RESTART_NODES = 3


def reset() -> None:
    from .models import DataProduct

    DataProduct.objects.all().delete()  # check runs, versions and incidents go with them; the files stay


def _fleet(hosts: list[str], times: pd.DatetimeIndex, rng: np.random.Generator, loaded: np.ndarray, keep: np.ndarray) -> pd.DataFrame:
    """Power (155) and temperature (150) of four GPUs per host at ``times``; ``loaded`` and ``keep`` are
    (hosts, times) masks: a job runs there (a loaded GPU's power and heat), a sample is sent there."""
    n_hosts, n_times = len(hosts), len(times)
    host_index = np.repeat(np.arange(n_hosts), 4 * n_times)
    gpu = np.tile(np.repeat(np.arange(4), n_times), n_hosts)
    minute = np.tile(np.arange(n_times), 4 * n_hosts)
    is_loaded = loaded[host_index, minute]
    power = np.where(is_loaded, rng.normal(560, 35, host_index.size), rng.normal(92, 6, host_index.size)).clip(60, 700)
    temperature = np.where(is_loaded, rng.normal(58, 4, host_index.size), rng.normal(31, 2, host_index.size)).clip(20, 90)
    sent = keep[host_index, minute]
    base = pd.DataFrame({"ts": times[minute[sent]], "cluster": DEMO_CLUSTER, "host": np.array(hosts, dtype=object)[host_index[sent]],
                         "gpu": gpu[sent], "uuid": ""})
    return pd.concat([base.assign(field=155, value=power[sent].round(1)), base.assign(field=150, value=temperature[sent].round(0))],
                     ignore_index=True)


def _mark(mask: np.ndarray, times: pd.DatetimeIndex, rows: list[int], start, end, *, closed_left: bool = True) -> None:
    """Set ``mask[rows, t]`` for the times from ``start`` to ``end`` (None: open): [start, end), or (start, end]."""
    if not rows:
        return
    side = ("left", "left") if closed_left else ("right", "right")
    lo = times.searchsorted(pd.Timestamp(start), side=side[0]) if start is not None else 0
    hi = times.searchsorted(pd.Timestamp(end), side=side[1]) if end is not None else len(times)
    if hi > lo:
        mask[np.ix_(rows, np.arange(lo, hi))] = True


def _error_counters(hosts: list[str], end, hours: int, rng: np.random.Generator) -> pd.DataFrame:
    times = pd.date_range(end=end, periods=hours, freq="1h", tz="UTC")
    rows = len(hosts) * 4 * len(times)
    host = np.repeat(np.array(hosts), 4 * len(times))
    gpu = np.tile(np.repeat(np.arange(4), len(times)), len(hosts))
    ts = np.tile(times, 4 * len(hosts))
    ecc = np.where(rng.random(rows) < 0.0005, rng.integers(1, 3, rows), 0)
    base = pd.DataFrame({"ts": ts, "cluster": DEMO_CLUSTER, "host": host, "gpu": gpu, "uuid": ""})
    return pd.concat([base.assign(field=230, value=0.0), base.assign(field=311, value=ecc.astype(float))], ignore_index=True)


@demo_part("catalog", order=90, reset=reset, weight=23)
def build(context: DemoContext) -> dict:
    from .models import DataProduct
    from .services import load_catalog

    report = load_catalog()
    if report.problems:
        raise RuntimeError("the built-in product files do not load: " + "; ".join(map(str, report.problems)))
    now = context.now.replace(second=0, microsecond=0)
    store = _fleet_store(context)
    samples = _write_fleet(context, store, now) if store is not None else 0
    checked = _check_history(now)
    return {"products": DataProduct.objects.count(), "fleet samples": samples, "check runs": checked * 4}


def _fleet_store(context: DemoContext):
    """The telemetry store, or None (and a line saying why) when it does not answer."""
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.store import telemetry_store

    try:
        store = telemetry_store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  catalog      no fleet telemetry: {exc}")
        return None
    return store


def _job_masks(hosts: list[str], times: pd.DatetimeIndex, now, context: DemoContext) -> tuple[np.ndarray, np.ndarray, set]:
    """(loaded, covered, profiled): host × minute where a demo job ran (its GPUs are loaded), where the
    telemetry part wrote a job's own device samples (10 s to a few minutes apart, same fields: the fleet
    stream does not overwrite them, it resumes when they end), and the nodes that ran such a job."""
    from apps.jobs.models import Job

    position = {host: index for index, host in enumerate(hosts)}
    loaded = np.zeros((len(hosts), len(times)), dtype=bool)
    for job_start, job_end, nodes in (Job.objects.filter(cluster__name=DEMO_CLUSTER, start_time__lt=now)
                                      .filter(Q(end_time__isnull=True) | Q(end_time__gt=times[0]))
                                      .values_list("start_time", "end_time", "node_list")):
        _mark(loaded, times, [position[h] for h in nodes or [] if h in position], job_start, job_end)
    covered = np.zeros_like(loaded)
    profiled = set()  # nodes that ran a demo job with its own telemetry, then or now
    for nodes, window_start, window_end in context.shared.get("telemetry_windows", []):
        _mark(covered, times, [position[h] for h in nodes if h in position], window_start, window_end)
        profiled.update(nodes)
    return loaded, covered, profiled


def _silent_nodes(up: list[tuple[str, int]], profiled: set) -> tuple[list[str], list[str]]:
    """(gap, restarted): quiet nodes (no running job, no profiled job) of group GAP_GROUP that stop sending,
    and others whose collector restarted an hour ago (twelve minutes missing)."""
    from apps.jobs.models import Job

    running = {host for nodes in Job.objects.filter(state="RUNNING").values_list("node_list", flat=True) for host in nodes or []}
    quiet = [host for host, _ in up if host not in running and host not in profiled]
    quiet_set = set(quiet)
    gap = [host for host, group in up if group == GAP_GROUP and host in quiet_set][:GAP_NODES]
    restarted = [host for host in quiet if host not in gap][100:100 + RESTART_NODES]
    return gap, restarted


def _write_fleet(context: DemoContext, store, now) -> int:
    """The fleet's telemetry of the last DEMO_FLEET_HOURS (idle or loaded GPUs, with the planted gaps) and
    two days old error counters; the number of samples written."""
    from apps.topology.models import Node

    rng = np.random.default_rng(context.seed)
    minutes = max(60, int(settings.DEMO_FLEET_HOURS * 60))
    times = pd.date_range(now - timedelta(minutes=minutes - 1), periods=minutes, freq="60s", tz="UTC")
    up = list(Node.objects.exclude(state="down").order_by("hostname").values_list("hostname", "group__number"))
    hosts = [host for host, _ in up]
    position = {host: index for index, host in enumerate(hosts)}
    loaded, covered, profiled = _job_masks(hosts, times, now, context)
    gap, restarted = _silent_nodes(up, profiled)
    keep = ~covered
    keep[[position[h] for h in gap], minutes - GAP_MINUTES:] = False
    keep[[position[h] for h in restarted], minutes - 70:minutes - 58] = False
    samples = 0
    for first in range(0, len(hosts), 400):
        rows = slice(first, first + 400)
        samples += store.write(_fleet(hosts[rows], times, rng, loaded[rows], keep[rows]))
    for first in range(0, len(hosts), 800):
        samples += store.write(_error_counters(hosts[first:first + 800], now - timedelta(hours=50), 24, rng))
    context.shared["catalog_gap_nodes"] = gap
    context.shared["catalog_restarted_nodes"] = restarted
    context.feed_memory["silent_nodes"] = gap
    return samples


def _check_history(now) -> int:
    """Every product checked at a few moments of the last hours (a short history, the gap's incident opening
    on the way); the number of check moments."""
    from .models import DataProduct
    from .services import run_checks

    checked = 0
    fleet_minutes = max(60, int(settings.DEMO_FLEET_HOURS * 60))
    moments = [m for m in (100, 70, 40, 20, 0) if m < fleet_minutes - 10]
    for product in DataProduct.objects.all():
        for minutes_ago in moments:
            run_checks(product, now=now - timedelta(minutes=minutes_ago))
            checked += 1
    return checked


@demo_feeder("fleet", order=90)
def feed(context: FeedContext) -> dict:
    """Each minute of the span: idle power and temperature of every up node without a demo job, the silent ones excepted."""
    from apps.jobs.models import Job
    from apps.telemetry.store import telemetry_store
    from apps.topology.models import Node

    moments = context.grid(60)
    if not moments:
        return {"samples": 0}
    times = pd.DatetimeIndex(moments).tz_convert("UTC")
    silent = set(context.memory.get("silent_nodes") or [])
    hosts = [host for host in Node.objects.exclude(state="down").order_by("hostname").values_list("hostname", flat=True)
             if host not in silent]
    position = {host: index for index, host in enumerate(hosts)}
    covered = np.zeros((len(hosts), len(times)), dtype=bool)
    # the telemetry feeder sends a job's own samples at (start, end]
    for job_start, job_end, nodes in (Job.objects.filter(cluster__name=DEMO_CLUSTER, source="demo", start_time__lt=context.end)
                                      .filter(Q(state="RUNNING", end_time__isnull=True) | Q(end_time__gt=context.start))
                                      .values_list("start_time", "end_time", "node_list")):
        _mark(covered, times, [position[h] for h in nodes or [] if h in position], job_start, job_end, closed_left=False)
    rng = np.random.default_rng([context.seed, int(times[0].timestamp())])
    frame = _fleet(hosts, times, rng, np.zeros_like(covered), ~covered)
    samples = telemetry_store().write(frame)
    return {"nodes": int((~covered).any(axis=1).sum()), "minutes": len(times), "samples": samples}
