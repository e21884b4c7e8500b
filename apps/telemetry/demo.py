"""Demo part: synthetic GPU telemetry for the demo's jobs, the scores of the ones people look at first, and
its feeder: the running jobs' GPUs keep sending while the demo lives.

At build time (``context.now``):

* the running 128-node Megatron job: its last three hours at 10 s (``DEMO_TELEMETRY_HOURS``), with a
  power-throttled GPU (the straggler), a hot GPU and a node with a degraded NIC planted (see
  ``synthetic_jobs``);
* a finished multi-node job that is memory-bound, and a finished job that left three of every four
  GPUs idle;
* every other running job: its last few minutes at 10 s (``recent_minutes()``), so the first scoring
  finds the fields it needs (before that, the fleet stream of the catalogue part has their nodes' power);
* the demo user's jobs (all of them: their own finished jobs are the first thing they open) and every
  job that ended in the last ``TELEMETRY_RECENT_HOURS`` (beat scores those once): their whole run, one
  sample per bucket of the job's heatmap (``history_points()`` per GPU at most: all of the heatmap's
  240 at the default ``DEMO_TELEMETRY_HOURS``, fewer in the tests' smaller demo), at least every minute
  from two hours before the fleet window on (the catalogue's gap checks look there) and every 10 s for
  a running job's recent minutes;
* the Megatron job, the two profile jobs and the demo user's jobs are materialised now, and their pks go
  to ``context.shared["telemetry_scored_jobs"]``: the saturation part scores them next; beat scores the rest.

Each job's profile follows its name (``synthetic_jobs.profile_for``). What was written where goes to
``context.shared["telemetry_windows"]`` so the catalogue's fleet stream leaves those node-minutes alone.

The feeder (``telemetry``, after the jobs' timeline): every demo job running during the span gets its
span at 10 s with its profile, continuing its run's phases (same hosts: the Megatron job's planted
problems stay on the same GPUs); a job that ended or started inside the span gets its part of it. The
demo user's jobs and the jobs that just ended are marked for live refresh (``apps.core.live``).
"""
import math
from datetime import timedelta

import pandas as pd
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part

from .backends.base import Query, TelemetryUnavailable
from .products import MAX_BUCKETS, choose_step
from .synthetic_jobs import Planted, default_planted, job_chunks, profile_for, straggler_onset_s, window_of_run

DEMO_CLUSTER = "alps"
DEMO_USER = "demo"
FLEET_INTERVAL = 60
JOB_INTERVAL = 10


def _store():
    from .store import telemetry_store

    return telemetry_store()


def reset() -> None:
    try:
        store = _store()
        now = timezone.now()
        store.delete(Query(start=now - timedelta(days=60), end=now + timedelta(days=1), cluster=DEMO_CLUSTER))
        store.delete_job_series(DEMO_CLUSTER)  # the demo jobs' application series (apps.appmetrics)
    except TelemetryUnavailable:
        pass  # nothing to remove from a store that is not there


def _finished_jobs(exclude: set[int]):
    """Finished demo jobs of 2-16 nodes that ran 40 minutes to 4 hours, oldest user first (stable)."""
    from apps.jobs.models import Job

    return (Job.objects.filter(cluster__name=DEMO_CLUSTER, state="COMPLETED", node_count__gte=2, node_count__lte=16,
                               end_time__gte=F("start_time") + timedelta(minutes=40),
                               end_time__lte=F("start_time") + timedelta(hours=4))
            .exclude(pk__in=exclude).exclude(user_name=DEMO_USER).order_by("user_name", "job_id"))


def _job_seed(seed: int, job_id: int, moment) -> int:
    """One generator per job and window start: the same window always gives the same samples."""
    return (seed * 1_000_003 + int(job_id)) * 1_000_033 + int(moment.timestamp())


def _aligned(moment, step: int):
    """The first moment at or after ``moment`` on the epoch-aligned grid of ``step`` seconds."""
    seconds = math.ceil(moment.timestamp() / step) * step
    return moment + timedelta(seconds=seconds - moment.timestamp())


def _segment(job, profile: str, start, end, interval: int, seed: int, planted: Planted):
    """The job's samples in [start, end) at ``interval`` s on the epoch grid, its run's phases continued."""
    first = _aligned(max(start, job.start_time), interval)
    if first >= end:
        return
    duration = (end - first).total_seconds()
    yield from job_chunks(profile, list(job.node_list), first, duration, interval_s=float(interval), cluster=DEMO_CLUSTER,
                          seed=_job_seed(seed, job.job_id, first), planted=planted,
                          elapsed_before_s=(first - job.start_time).total_seconds(), hosts_per_chunk=64)


def _owned_by(job):
    """A filter dropping the samples another job's synthetic history has on ``job``'s nodes while it runs."""
    hosts = set(job.node_list or [])
    start = pd.Timestamp(job.start_time)
    end = pd.Timestamp(job.end_time) if job.end_time else None

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        inside = frame["host"].isin(hosts) & (frame["ts"] >= start)
        if end is not None:
            inside &= frame["ts"] < end
        return frame[~inside] if inside.any() else frame

    return keep


def history_points() -> int:
    """Samples per GPU of a job's history before the fleet window: one per bucket of its heatmap with the
    default three hours of DEMO_TELEMETRY_HOURS, fewer when the demo is made smaller (the tests)."""
    return int(min(MAX_BUCKETS, max(12, 80 * settings.DEMO_TELEMETRY_HOURS)))


def recent_minutes() -> float:
    """The minutes at 10 s a running job has at build time (10 by default, fewer in a smaller demo)."""
    return min(10.0, max(2.0, 20 * settings.DEMO_TELEMETRY_HOURS))


def _history(job, now, fine_from, seed: int):
    """A job's whole run (up to ``now`` while it runs): coarse before ``fine_from``, at least a minute apart
    after it, 10 s for a running job's last minutes."""
    end = job.end_time or now
    start = job.start_time
    coarse = max(JOB_INTERVAL, choose_step((end - start).total_seconds(), max_buckets=history_points()))
    recent = now - timedelta(minutes=recent_minutes()) if job.end_time is None else end
    cuts = [(start, coarse), (max(start, min(fine_from, recent)), min(coarse, FLEET_INTERVAL)),
            (max(start, recent), JOB_INTERVAL), (end, None)]
    profile, planted = profile_for(job.name), Planted()
    for (lo, interval), (hi, _next) in zip(cuts, cuts[1:]):
        if hi > lo:
            yield from _segment(job, profile, lo, hi, interval, seed, planted)


@demo_part("telemetry", order=60, reset=reset, weight=40)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    from .services import job_telemetry_refresh

    key = context.shared.get("megatron_job")
    if not key:
        return {}
    try:
        store = _store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  telemetry    skipped: {exc}")
        return {}
    now = context.now
    # From two hours before the fleet window on (the catalogue's build-time checks look back that far, and
    # beat's checks within the fleet window), job samples are at most a minute apart: no false gaps there.
    fine_from = now - timedelta(minutes=max(60, int(settings.DEMO_FLEET_HOURS * 60)) + 120)
    windows = context.shared.setdefault("telemetry_windows", [])
    megatron = Job.objects.get(cluster__name=key[0], job_id=key[1])
    start, duration, before = window_of_run(megatron.start_time, now, hours=settings.DEMO_TELEMETRY_HOURS)
    # The straggler appears partway through the window (its throughput dip is one of the demo's stories).
    planted = default_planted(list(megatron.node_list), throttled_after_s=straggler_onset_s(before, duration))
    samples = 0
    for chunk in job_chunks("megatron", list(megatron.node_list), start, duration, seed=context.seed, planted=planted,
                            elapsed_before_s=before, cluster=DEMO_CLUSTER):
        samples += store.write(chunk)
    windows.append((list(megatron.node_list), start, now))
    scored = [megatron]
    used = {megatron.pk}
    for profile in ("memory_bound", "idle_gpus"):
        job = _finished_jobs(used).first()
        if job is None:
            continue
        used.add(job.pk)
        duration = min((job.end_time - job.start_time).total_seconds(), 3600 * min(2.0, settings.DEMO_TELEMETRY_HOURS))
        for chunk in job_chunks(profile, list(job.node_list), job.start_time, duration, seed=context.seed + len(used),
                                cluster=DEMO_CLUSTER):
            samples += store.write(chunk)
        windows.append((list(job.node_list), job.start_time, job.start_time + timedelta(seconds=duration)))
        scored.append(job)
        context.shared[f"telemetry_{profile}_job"] = (job.cluster.name, job.job_id)
    # The demo user's own jobs, the jobs beat will score (running, or ended within TELEMETRY_RECENT_HOURS),
    # whole runs; everybody else's running jobs, their recent minutes.
    recent = now - timedelta(hours=settings.TELEMETRY_RECENT_HOURS)
    histories = (Job.objects.filter(cluster__name=DEMO_CLUSTER, start_time__isnull=False, start_time__lt=now)
                 .filter(Q(user_name=DEMO_USER) | Q(end_time__gte=recent)).exclude(pk__in=used).order_by("job_id"))
    batch = []
    # The demo's job history is synthetic and may put another job on some of the Megatron run's nodes while it
    # runs; its samples there would mix into the run's GPUs (the hot GPU read 67 °C, not 83): the run owns them.
    owned = _owned_by(megatron)
    for job in histories:
        if not job.node_list:
            continue
        used.add(job.pk)
        batch.extend(owned(frame) for frame in _history(job, now, fine_from, context.seed))
        windows.append((list(job.node_list), job.start_time, job.end_time or now))
        if job.user_name == DEMO_USER:
            scored.append(job)
        if sum(len(frame) for frame in batch) > 500_000:
            samples += store.write(pd.concat(batch, ignore_index=True))
            batch = []
    recent_start = now - timedelta(minutes=recent_minutes())
    for job in (Job.objects.filter(cluster__name=DEMO_CLUSTER, state="RUNNING", start_time__lt=now)
                .exclude(pk__in=used).order_by("job_id")):
        if not job.node_list:
            continue
        batch.extend(owned(frame) for frame in _segment(job, profile_for(job.name), recent_start, now, JOB_INTERVAL, context.seed,
                                                        Planted()))
        windows.append((list(job.node_list), max(job.start_time, recent_start), now))
        if sum(len(frame) for frame in batch) > 500_000:
            samples += store.write(pd.concat(batch, ignore_index=True))
            batch = []
    if batch:
        samples += store.write(pd.concat(batch, ignore_index=True))
    for job in scored:
        job_telemetry_refresh(job)
    # The products built on these samples (the saturation score) are their apps' demo parts, which follow.
    context.shared["telemetry_scored_jobs"] = [job.pk for job in scored]
    context.shared["telemetry_planted"] = planted.as_dict()
    context.feed_memory["megatron"] = megatron.pk
    return {"samples": samples, "jobs": len(used), "materialised": len(scored)}


# ---------------------------------------------------------------------------------------------
# The feeder


def _mark_dirty(job_pks: list[int]) -> None:
    """Tell live refresh (apps/core/live.py) which jobs got new samples it should bring up to date within
    seconds; beat's periodic refresh covers the others."""
    if not job_pks:
        return
    try:
        from apps.core.live import mark_jobs_dirty
    except ImportError:
        return
    mark_jobs_dirty(job_pks, "demo feeder")


@demo_feeder("telemetry", order=60)
def feed(context: FeedContext) -> dict:
    """Every demo job running during the span: its GPUs' samples at 10 s, as their profile and phases say."""
    from apps.jobs.models import Job

    jobs = (Job.objects.filter(cluster__name=DEMO_CLUSTER, source="demo", start_time__isnull=False, start_time__lt=context.end)
            .filter(Q(state="RUNNING", end_time__isnull=True) | Q(end_time__gt=context.start)).order_by("job_id"))
    megatron = context.memory.get("megatron")
    frames, fed, gpus, watched = [], [], 0, []
    for job in jobs:
        hosts = list(job.node_list or [])
        if not hosts:
            continue
        times = context.grid(JOB_INTERVAL, start=job.start_time, end=job.end_time)
        if not times:
            continue
        profile = "megatron" if job.pk == megatron else profile_for(job.name)
        planted = default_planted(hosts) if job.pk == megatron else Planted()
        frames.extend(job_chunks(profile, hosts, times[0], (times[-1] - times[0]).total_seconds() + JOB_INTERVAL,
                                 interval_s=float(JOB_INTERVAL), cluster=DEMO_CLUSTER, seed=_job_seed(context.seed, job.job_id, times[0]),
                                 planted=planted, elapsed_before_s=(times[0] - job.start_time).total_seconds(),
                                 hosts_per_chunk=len(hosts)))
        fed.append(job.pk)
        gpus += len(hosts) * 4
        if job.user_name == DEMO_USER or job.end_time is not None:
            watched.append(job.pk)
    samples = _store().write(pd.concat(frames, ignore_index=True)) if frames else 0
    context.shared["telemetry_jobs"] = fed
    # Live refresh for what people watch: the demo user's jobs and the jobs that just ended (their final
    # products). The other running jobs are beat's (every few minutes): refreshing ~50 jobs every tick would
    # cost the small machine more than the feeding itself.
    _mark_dirty(watched)
    return {"jobs": len(fed), "gpus": gpus, "samples": samples, "refreshing": len(watched)}


# -- versions: the fleet's driver history and a driver minority in the Megatron job (issue 38) --------------------

DEMO_DRIVER, DEMO_OLD_DRIVER, DEMO_MINORITY_DRIVER = "560.35.03", "555.42.06", "550.54.15"


def reset_versions() -> None:
    from .models import VersionFact

    VersionFact.objects.all().delete()


@demo_part("versions", order=61, reset=reset_versions, weight=2)
def build_versions(context: DemoContext) -> dict:
    """Every node went from driver 555.42.06 to 560.35.03 group by group 12 days ago (the drift); four nodes of the
    Megatron job, two behind each of two switches, still run 550.54.15 (the job's first-screen finding and the
    version map's mixed cells); the Megatron nodes report their GPUs' firmware and the job's communication stack."""
    from apps.jobs.models import Job
    from apps.topology.models import Node

    from .models import VersionFact

    now = context.now
    nodes = list(Node.objects.order_by("hostname").values_list("hostname", "group__number"))
    if not nodes:
        return {}
    key = context.shared.get("megatron_job")
    megatron = Job.objects.filter(cluster__name=key[0], job_id=key[1]).first() if key else None
    job_nodes = list(megatron.node_list) if megatron else []
    minority = set(job_nodes[8:10] + job_nodes[72:74]) if len(job_nodes) >= 74 else set(job_nodes[:1])
    partition = (megatron.partition if megatron and megatron.partition else "normal")
    rows = []

    def fact(host, key, value, first, last, gpu=-1):
        rows.append(VersionFact(cluster=key_cluster, host=host, gpu=gpu, key=key, value=value, first_seen=first,
                                last_seen=last, partition=partition if host in job_set or group % 4 else "debug",
                                source="demo"))

    key_cluster = key[0] if key else ""
    job_set = set(job_nodes)
    rollout = now - timedelta(days=12)
    for host, group in nodes:
        upgraded = rollout + timedelta(hours=2 * group)
        fact(host, "driver", DEMO_OLD_DRIVER, now - timedelta(days=40), upgraded - timedelta(minutes=5))
        if host in minority:
            fact(host, "driver", DEMO_MINORITY_DRIVER, upgraded, now)
            fact(host, "cuda_driver", "12.4", upgraded, now)
        else:
            fact(host, "driver", DEMO_DRIVER, upgraded, now)
            fact(host, "cuda_driver", "12.6", upgraded, now)
    stack = {"nccl": "2.21.5", "ofi_nccl": "1.9.2-aws", "libfabric": "1.22.0", "cxi": "1.22.0",
             "image_digest": "sha256:4f0c9d2e5a418b7e21d46c0e9a7f4b1268a61b7c30d2f4e95b1a893c5e7d20f4"}
    started = megatron.start_time if megatron and megatron.start_time else now
    for host in job_nodes:
        group = 1
        for name, value in stack.items():
            fact(host, name, value, started, now)
        for gpu in range(4):
            fact(host, "vbios", "96.00.89.00.01", started, now, gpu)
    VersionFact.objects.bulk_create(rows, batch_size=2000)
    context.say(f"  versions     {len(rows):,} facts; {len(minority)} Megatron nodes on driver {DEMO_MINORITY_DRIVER}")
    return {"facts": len(rows), "minority": sorted(minority)}
