"""Demo part: the built-in data products over the demo machine, with one coverage gap and one stale product.

* fleet telemetry for ``dcgm-device``: power and temperature of every GPU of every node that is up,
  once a minute for the last ``DEMO_FLEET_HOURS`` (the nodes of the demo jobs already have theirs at
  10 s). Planted: sixteen nodes of dragonfly group 17 stopped reporting 35 minutes ago (a coverage
  gap that opens an incident), and three nodes were silent for twelve minutes an hour ago (an
  exporter restart: a closed gap);
* ``gpu-error-counters``: the hourly health exporter sent XID and ECC counters for a day and then
  stopped two days ago (stale);
* ``slingshot-nic-counters`` is declared on an Elasticsearch index the demo does not have.

The checks run at a few moments of the last two hours, so each product has a short history and the
gap's incident opens when the nodes have been silent longer than the freshness limit.
"""
from datetime import timedelta

import numpy as np
import pandas as pd
from django.conf import settings
from django.utils import timezone

from apps.core.demo import DemoContext, demo_part

DEMO_CLUSTER = "alps"
GAP_GROUP = 17
GAP_NODES = 16
GAP_MINUTES = 35
RESTART_NODES = 3


def reset() -> None:
    from .models import DataProduct

    DataProduct.objects.all().delete()  # check runs, versions and incidents go with them; the files stay


def _fleet(hosts: list[str], start, minutes: int, rng: np.random.Generator, busy: set, silent: dict) -> pd.DataFrame:
    """Power (155) and temperature (150) of four GPUs per host, one sample a minute; ``silent``: host -> (from, to) minutes."""
    times = pd.date_range(start, periods=minutes, freq="60s", tz="UTC")
    n_hosts, n_times = len(hosts), len(times)
    host_index = np.repeat(np.arange(n_hosts), 4 * n_times)
    gpu = np.tile(np.repeat(np.arange(4), n_times), n_hosts)
    minute = np.tile(np.arange(n_times), 4 * n_hosts)
    loaded = np.isin(np.array(hosts), list(busy))[host_index]
    power = np.where(loaded, rng.normal(560, 35, host_index.size), rng.normal(92, 6, host_index.size)).clip(60, 700)
    temperature = np.where(loaded, rng.normal(58, 4, host_index.size), rng.normal(31, 2, host_index.size)).clip(20, 90)
    keep = np.ones(host_index.size, dtype=bool)
    position = {host: index for index, host in enumerate(hosts)}
    for host, (first, last) in silent.items():
        if host in position:
            keep &= ~((host_index == position[host]) & (minute >= first) & (minute < last))
    base = pd.DataFrame({"ts": times[minute[keep]], "cluster": DEMO_CLUSTER, "host": np.array(hosts)[host_index[keep]],
                         "gpu": gpu[keep], "uuid": ""})
    return pd.concat([base.assign(field=155, value=power[keep].round(1)), base.assign(field=150, value=temperature[keep].round(0))],
                     ignore_index=True)


def _error_counters(hosts: list[str], end, hours: int, rng: np.random.Generator) -> pd.DataFrame:
    times = pd.date_range(end=end, periods=hours, freq="1h", tz="UTC")
    rows = len(hosts) * 4 * len(times)
    host = np.repeat(np.array(hosts), 4 * len(times))
    gpu = np.tile(np.repeat(np.arange(4), len(times)), len(hosts))
    ts = np.tile(times, 4 * len(hosts))
    ecc = np.where(rng.random(rows) < 0.0005, rng.integers(1, 3, rows), 0)
    base = pd.DataFrame({"ts": ts, "cluster": DEMO_CLUSTER, "host": host, "gpu": gpu, "uuid": ""})
    return pd.concat([base.assign(field=230, value=0.0), base.assign(field=311, value=ecc.astype(float))], ignore_index=True)


@demo_part("catalog", order=90, reset=reset)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.store import telemetry_store
    from apps.topology.models import Node

    from .models import DataProduct
    from .services import load_catalog, run_checks

    report = load_catalog()
    if report.problems:
        raise RuntimeError("the built-in product files do not load: " + "; ".join(map(str, report.problems)))
    now = timezone.now().replace(second=0, microsecond=0)
    samples = 0
    try:
        store = telemetry_store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  catalog      no fleet telemetry: {exc}")
        store = None
    if store is not None:
        rng = np.random.default_rng(context.seed)
        minutes = max(60, int(settings.DEMO_FLEET_HOURS * 60))
        start = now - timedelta(minutes=minutes - 1)
        # The demo jobs' nodes have their own 10 s device samples while the job ran; the fleet stream does not
        # overwrite them (same field, same key): it starts on those nodes when their job ended.
        running_job_hosts, job_ended = set(), {}
        for key in ("megatron_job", "telemetry_memory_bound_job", "telemetry_idle_gpus_job"):
            if context.shared.get(key):
                cluster, job_id = context.shared[key]
                job = Job.objects.get(cluster__name=cluster, job_id=job_id)
                if job.end_time is None:
                    running_job_hosts.update(job.node_list or [])
                else:
                    for host in job.node_list or []:
                        job_ended[host] = max(job_ended.get(host, job.end_time), job.end_time)
        up = list(Node.objects.exclude(state="down").order_by("hostname").values_list("hostname", "group__number"))
        hosts = [host for host, _ in up if host not in running_job_hosts]
        gap = [host for host, group in up if group == GAP_GROUP and host in hosts and host not in job_ended][:GAP_NODES]
        restarted = [host for host in hosts if host not in gap and host not in job_ended][100:100 + RESTART_NODES]
        silent = {host: (0, int((ended - start).total_seconds() // 60) + 1) for host, ended in job_ended.items() if ended > start}
        silent.update({host: (minutes - GAP_MINUTES, minutes) for host in gap})
        silent.update({host: (minutes - 70, minutes - 58) for host in restarted})
        busy = {host for nodes in Job.objects.filter(state="RUNNING").values_list("node_list", flat=True) for host in nodes or []}
        for first in range(0, len(hosts), 400):
            samples += store.write(_fleet(hosts[first:first + 400], start, minutes, rng, busy, silent))
        for first in range(0, len(hosts), 800):
            samples += store.write(_error_counters(hosts[first:first + 800], now - timedelta(hours=50), 24, rng))
        context.shared["catalog_gap_nodes"] = gap
        context.shared["catalog_restarted_nodes"] = restarted
    checked = 0
    fleet_minutes = max(60, int(settings.DEMO_FLEET_HOURS * 60))
    moments = [m for m in (100, 70, 40, 20, 0) if m < fleet_minutes - 10]  # a short history, the gap's incident opening on the way
    for product in DataProduct.objects.all():
        for minutes_ago in moments:
            run_checks(product, now=now - timedelta(minutes=minutes_ago))
            checked += 1
    return {"products": DataProduct.objects.count(), "fleet samples": samples, "check runs": checked * 4}
