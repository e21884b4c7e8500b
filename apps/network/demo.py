"""Demo part: Slingshot NIC counters for the demo's jobs, and its feeder: running jobs' NICs keep counting.

At build time (after the GPU telemetry, before the saturation scores, which read the NICs for their stragglers):

* the running Megatron job: its telemetry window (``DEMO_TELEMETRY_HOURS``) at a minute, its last
  ``recent_minutes()`` at 10 s; the node the GPU telemetry plants ``slow_nic`` on (``default_planted``) has its
  ``hsn2`` degraded: about 30 % of its packets retried, 60 % of its peers' traffic (``synthetic``);
* the demo user's jobs and every other running job: their run (coarse: at most ``history_points()`` per counter)
  and a running job's recent minutes at 10 s, all NICs healthy.

The feeder (``network``, after ``telemetry``): every demo job running during the span gets its counters at 30 s
(not 1 Hz: the demo stays small), the Megatron job's degraded NIC staying where it is. Counters are a function of
the run's seconds (``synthetic.nic_counters``): a span fed twice writes the same keys, and the rates run on
smoothly from build to feed.
"""
from datetime import timedelta

import pandas as pd
from django.db.models import Q

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.demo import DEMO_CLUSTER, DEMO_USER, history_points, recent_minutes
from apps.telemetry.products import choose_step
from apps.telemetry.store import telemetry_store
from apps.telemetry.synthetic_jobs import default_planted, window_of_run

from .synthetic import DEGRADED_NIC, grid, nic_chunks

JOB_INTERVAL = 10  # seconds between a running job's samples at build time
# ... and while the demo runs: a NIC counter sampled every 30 s still fills every bucket of the heatmaps (120 s and
# up) with four samples, at a third of the rows (at 10 s the feeder cost more than the GPU telemetry's)
FEED_INTERVAL = 30
HISTORY_INTERVAL = 60  # at least this between samples of a job's older history
BATCH_ROWS = 400_000


def reset() -> None:
    try:
        telemetry_store().delete_net(DEMO_CLUSTER)
    except TelemetryUnavailable:
        pass  # no store, or one without a network table: nothing to remove


def degraded_of(job) -> tuple[str, str] | None:
    """The (host, NIC) degraded on the demo's Megatron job: hsn2 of the GPU telemetry's ``slow_nic`` node."""
    planted = default_planted(list(job.node_list or []))
    return (planted.slow_nic, DEGRADED_NIC) if planted.slow_nic else None


def _times(start, end, now, *, coarse: int):
    """Coarse up to the recent minutes, then every 10 s (a finished job: coarse throughout)."""
    recent = max(start, now - timedelta(minutes=recent_minutes())) if end is None else end
    stop = end or now
    return grid(start, recent, coarse) + grid(recent, stop, JOB_INTERVAL)


class _Writer:
    def __init__(self, store):
        self.store, self.batch, self.rows, self.written = store, [], 0, 0

    def add(self, frame: pd.DataFrame) -> None:
        self.batch.append(frame)
        self.rows += len(frame)
        if self.rows >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.written += self.store.write_net(pd.concat(self.batch, ignore_index=True))
        self.batch, self.rows = [], 0


@demo_part("network", order=62, reset=reset, weight=21)
def build(context: DemoContext) -> dict:
    from django.conf import settings

    from apps.jobs.models import Job

    key = context.shared.get("megatron_job")
    if not key:
        return {}
    try:
        store = telemetry_store()
        store.check()
        store.read_net(DEMO_CLUSTER, hosts=["-"], start=context.now, end=context.now + timedelta(seconds=1))  # has a network table
    except TelemetryUnavailable as exc:
        context.say(f"  network      skipped: {exc}")
        return {}
    now = context.now
    writer = _Writer(store)
    megatron = Job.objects.get(cluster__name=key[0], job_id=key[1])
    start, _duration, _before = window_of_run(megatron.start_time, now, hours=settings.DEMO_TELEMETRY_HOURS)
    degraded = degraded_of(megatron)
    for chunk in nic_chunks(list(megatron.node_list), _times(start, None, now, coarse=HISTORY_INTERVAL),
                            run_start=megatron.start_time, cluster=DEMO_CLUSTER, degraded=degraded, seed=context.seed):
        writer.add(chunk)
    jobs = (Job.objects.filter(cluster__name=DEMO_CLUSTER, start_time__isnull=False, start_time__lt=now)
            .filter(Q(user_name=DEMO_USER) | Q(state="RUNNING", end_time__isnull=True))
            .exclude(pk=megatron.pk).order_by("job_id"))
    count = 1
    for job in jobs:
        if not job.node_list:
            continue
        end = job.end_time if job.end_time and job.end_time < now else None
        coarse = max(HISTORY_INTERVAL, choose_step(((end or now) - job.start_time).total_seconds(), max_buckets=history_points()))
        for chunk in nic_chunks(list(job.node_list), _times(job.start_time, end, now, coarse=coarse), run_start=job.start_time,
                                cluster=DEMO_CLUSTER, seed=context.seed):
            writer.add(chunk)
        count += 1
    writer.flush()
    context.feed_memory["network_degraded"] = list(degraded) if degraded else None
    context.shared["network_degraded"] = degraded
    return {"samples": writer.written, "jobs": count, "degraded": "/".join(degraded[::-1]) if degraded else ""}


@demo_feeder("network", order=61)
def feed(context: FeedContext) -> dict:
    """Every demo job running during the span: its NICs' counters at FEED_INTERVAL (30 s)."""
    from apps.jobs.models import Job

    jobs = (Job.objects.filter(cluster__name=DEMO_CLUSTER, source="demo", start_time__isnull=False, start_time__lt=context.end)
            .filter(Q(state="RUNNING", end_time__isnull=True) | Q(end_time__gt=context.start)).order_by("job_id"))
    megatron = context.memory.get("megatron")
    try:
        store = telemetry_store()
    except TelemetryUnavailable:
        return {"jobs": 0, "samples": 0}
    writer, fed = _Writer(store), 0
    for job in jobs:
        hosts = list(job.node_list or [])
        times = context.grid(FEED_INTERVAL, start=job.start_time, end=job.end_time)
        if not hosts or not times:
            continue
        degraded = degraded_of(job) if job.pk == megatron else None
        for chunk in nic_chunks(hosts, times, run_start=job.start_time, cluster=DEMO_CLUSTER, degraded=degraded,
                                seed=context.seed, hosts_per_chunk=len(hosts)):
            writer.add(chunk)
        fed += 1
    try:
        writer.flush()
    except TelemetryUnavailable:
        return {"jobs": 0, "samples": 0}
    return {"jobs": fed, "samples": writer.written}
