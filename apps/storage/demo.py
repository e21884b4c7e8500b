"""Demo part: Lustre job statistics — the Megatron job's checkpoints on the file system, small I/O of other jobs.

At build time (after telemetry and appmetrics), readings of ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats``
every :data:`READING_S` seconds, as the servers of the demo's ``capstor`` file system (8 OSTs, one MDT) would print
them with ``jobid_name=alps.%j`` (plus a login node's ``rsync.1001``, not a Slurm job), go through the real parser
(``apps.telemetry.lustre``) into the job series:

* the running Megatron job (``context.shared["megatron_job"]``), its whole run: data loading at 40 MB/s, logs, and a
  checkpoint of its GPT-175B state (175e9 parameters x 14 bytes: bf16 weights, fp32 master weights and Adam
  moments, ~2.45 TB) every 30 minutes of the run from 30 minutes on, written in 80 s from 5 s into the telemetry's
  90 s of idle SMs (``synthetic_jobs``: ``absolute % 1800 < 90``) — none while the run evaluates (the last 15
  minutes of a window of an hour or more, as the telemetry and appmetrics parts say);
* up to :data:`SMALL_JOBS` other running jobs, the last ``DEMO_TELEMETRY_HOURS``: steady small reads and writes.

The feeder (``storage``, after appmetrics) sends each tick's readings for those jobs while they run; a reading fed
twice writes the same keys again (the store replaces them).
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pandas as pd
from django.conf import settings

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.lustre import parse_text
from apps.telemetry.synthetic_jobs import window_of_run

from .synthetic import IoProfile, Reading

DEMO_CLUSTER = "alps"
FILESYSTEM = "capstor"
OSTS = tuple(f"{FILESYSTEM}-OST{n:04x}" for n in range(8))
MDT = f"{FILESYSTEM}-MDT0000"
READING_S = 30
SMALL_JOBS = 6
CHECKPOINT_BYTES = 175e9 * 14  # GPT-175B: bf16 weights (2) + fp32 master weights (4) + Adam moments (8) per parameter
EVALUATION_S = 900.0


def _store():
    from apps.telemetry.store import telemetry_store

    return telemetry_store()


def reset() -> None:
    """The series go with the demo cluster's job series (appmetrics' reset removes them all; so does this one)."""
    try:
        _store().delete_job_series(DEMO_CLUSTER)
    except TelemetryUnavailable:
        pass


def _profile(spec: dict) -> IoProfile:
    """The I/O profile a job's memory entry describes (JSON: the feeder rebuilds it every tick)."""
    return IoProfile(job_id=f"{DEMO_CLUSTER}.{spec['job_id']}", osts=tuple(spec["osts"]), mdt=MDT, read_bps=spec["read_bps"],
                     write_bps=spec["write_bps"], meta_per_s=spec["meta_per_s"], checkpoint_bytes=spec.get("checkpoint_bytes", 0.0),
                     checkpoint_files=spec.get("checkpoint_files", 512), skip=tuple(spec["skip"]) if spec.get("skip") else None,
                     start_epoch=spec["start"])


def _megatron_spec(job, now: datetime) -> dict:
    _start, duration, _before = window_of_run(job.start_time, now, hours=settings.DEMO_TELEMETRY_HOURS)
    elapsed = (now - job.start_time).total_seconds()
    skip = [elapsed - EVALUATION_S, elapsed] if duration >= 3600 else None
    return {"pk": job.pk, "job_id": int(job.job_id), "start": job.start_time.timestamp(), "osts": list(OSTS), "read_bps": 40e6,
            "write_bps": 2e6, "meta_per_s": 3.0, "checkpoint_bytes": CHECKPOINT_BYTES, "checkpoint_files": int(job.gpus or 512),
            "skip": skip, "from": job.start_time.timestamp()}


def _small_spec(job, seed: int, since: datetime) -> dict:
    rng = random.Random(seed * 1_000_003 + int(job.job_id))
    first = rng.randrange(len(OSTS))
    return {"pk": job.pk, "job_id": int(job.job_id), "start": job.start_time.timestamp(),
            "osts": [OSTS[first], OSTS[(first + 3) % len(OSTS)]], "read_bps": rng.uniform(20e6, 400e6),
            "write_bps": rng.uniform(2e6, 40e6), "meta_per_s": rng.uniform(0.5, 20.0),
            "from": max(job.start_time, since).timestamp()}


def _grid(lo: datetime, hi: datetime) -> list[datetime]:
    """Reading times in (lo, hi] on an epoch-aligned grid of READING_S."""
    first = int(lo.timestamp()) // READING_S * READING_S + READING_S
    last = int(hi.timestamp()) // READING_S * READING_S
    return [datetime.fromtimestamp(moment, timezone.utc) for moment in range(first, last + 1, READING_S)]


def _write_readings(specs: list[dict], moments: list[datetime], ends: dict[int, float | None]) -> tuple[int, int]:
    """Print, parse and store one reading per moment with every job of ``specs`` that ran then; (rows, readings)."""
    profiles = [(spec, _profile(spec)) for spec in specs]
    frames, rows = [], 0
    store = _store()
    for moment in moments:
        epoch = moment.timestamp()
        reading = Reading(epoch)
        for spec, profile in profiles:
            end = ends.get(spec["pk"])
            if epoch <= spec["from"] or (end is not None and epoch > end + READING_S):
                continue
            reading.add(profile, min(epoch, end) - spec["start"] if end is not None else epoch - spec["start"])
        if not reading.entries:
            continue
        reading.add_raw(OSTS[0], "rsync.1001", epoch - 600, {"read_bytes": (12, 12 << 20), "write_bytes": (0, 0)})
        result = parse_text(reading.text(), cluster=DEMO_CLUSTER, ts=moment, clusters={DEMO_CLUSTER})
        if result.errors:  # the demo prints what the parser reads: anything else is a bug here
            raise ValueError(f"demo job_stats reading at {moment:%H:%M:%S}: {result.errors[0]}")
        frames.append(result.frame)
        if sum(len(frame) for frame in frames) > 200_000:
            rows += store.write_job_series(pd.concat(frames, ignore_index=True))
            frames = []
    if frames:
        rows += store.write_job_series(pd.concat(frames, ignore_index=True))
    return rows, len(moments)


def _ends(specs: list[dict]) -> dict[int, float | None]:
    from apps.jobs.models import Job

    return {pk: (end.timestamp() if end else None)
            for pk, end in Job.objects.filter(pk__in=[spec["pk"] for spec in specs]).values_list("pk", "end_time")}


@demo_part("storage", order=69, reset=reset, weight=4)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    try:
        _store().check()
    except TelemetryUnavailable as exc:
        context.say(f"  storage      skipped: {exc}")
        return {}
    key = context.shared.get("megatron_job")
    megatron = Job.objects.filter(cluster__name=key[0], job_id=key[1]).first() if key else None
    now = context.now
    specs = []
    if megatron is not None and megatron.start_time is not None:
        specs.append(_megatron_spec(megatron, now))
    since = now - timedelta(hours=settings.DEMO_TELEMETRY_HOURS)
    others = (Job.objects.filter(cluster__name=DEMO_CLUSTER, state="RUNNING", start_time__isnull=False, start_time__lt=now)
              .exclude(pk=megatron.pk if megatron else -1).order_by("job_id")[:SMALL_JOBS])
    specs.extend(_small_spec(job, context.seed, since) for job in others)
    if not specs:
        return {}
    first = datetime.fromtimestamp(min(spec["from"] for spec in specs), timezone.utc)
    rows, readings = _write_readings(specs, _grid(first, now), _ends(specs))
    context.feed_memory["storage"] = {"jobs": specs}
    checkpoints = len(_profile(specs[0]).checkpoints((now - megatron.start_time).total_seconds())) if megatron else 0
    context.say(f"  storage      Lustre job stats of {len(specs)} jobs, {readings:,} readings; {checkpoints} checkpoint bursts "
                "on the Megatron job")
    return {"lustre_rows": rows, "lustre_jobs": len(specs), "checkpoints": checkpoints}


@demo_feeder("storage", order=69)
def feed(context: FeedContext) -> dict:
    """The span's readings for the jobs the build gave I/O, while they run."""
    memory = (context.memory or {}).get("storage") or {}
    specs = memory.get("jobs") or []
    if not specs:
        return {"skipped": "no Lustre demo jobs"}
    try:
        rows, readings = _write_readings(specs, _grid(context.start, context.end), _ends(specs))
    except TelemetryUnavailable as exc:
        return {"skipped": f"telemetry store unavailable: {exc}"}
    return {"rows": rows, "readings": readings}
