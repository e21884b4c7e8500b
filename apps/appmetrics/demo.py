"""Demo part: application metrics — the running Megatron job logs its training, and a scaling series of one model.

At build time (after the telemetry and saturation parts, which planted and scored the Megatron job's GPUs):

* the running Megatron job (``context.shared["megatron_job"]``) gets its model config (the GPT-175B shape of
  its command line, 4,096-token sequences, a global batch of 320 sequences: 6.84 s per iteration on its 512
  GPUs, ~42 % MFU) and its application series for the whole run so far (``synthetic.Run``): tokens/s,
  iteration time, loss, learning rate, grad norm every 10 iterations, a checkpoint every 30 minutes of run
  time (the telemetry's idle windows) with its dip, the straggler's onset (``throttled_after_s`` of the
  planted problems, or the same place ``synthetic_jobs.straggler_onset_s`` gives when the telemetry part did
  not say) with the throughput ~14 % down from there, and the evaluation at the end of a window of an hour
  or more, where the telemetry has one;
* five finished runs of one model (Apertus-8B shape) at 32, 64, 128, 256 and 512 GPUs, 20 minutes each, three
  days ago, of the demo user (``apertus-8b-scaling-032`` ...): same global batch (strong scaling), per-GPU
  throughput falling to 80 % of the 32-GPU run's at 512, with their model config and series, and a small GPU
  history (one sample a minute) with its saturation score, as every job of the demo user has.

The feeder (``appmetrics``, after the telemetry and saturation feeders) appends the Megatron job's rows for
each tick's span, continuing its steps; a span fed twice writes the same keys again (the store replaces them).
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd
from django.conf import settings

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.synthetic_jobs import Planted, job_chunks, straggler_onset_s, window_of_run

from . import synthetic
from .choices import JobModelConfigSourceChoices

DEMO_CLUSTER = "alps"
DEMO_USER = "demo"
GPUS_PER_NODE = 4
# The Megatron job's model: its command line's shape (96 layers, hidden 12288, 96 heads, 4,096 tokens); the
# global batch that 250 iterations between checkpoints 30 minutes apart give at ~42 % MFU on 512 GH200s.
MEGATRON_MODEL = {"params": 175_000_000_000, "layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96, "seq_len": 4096,
                  "vocab": 51200, "global_batch": 320}
MEGATRON_ITERATION_S = 6.84
# The scaling series: an Apertus-8B-shaped dense model, the same global batch at every size (strong scaling).
SCALING_NAME = "apertus-8b-scaling-{gpus:03d}"
SCALING_MODEL = {"params": 8_000_000_000, "layers": 32, "hidden": 4096, "ffn_hidden": 21504, "heads": 32, "kv_heads": 8,
                 "seq_len": 4096, "vocab": 131072, "global_batch": 1024}
SCALING_EFFICIENCY = {32: 1.0, 64: 0.97, 128: 0.93, 256: 0.87, 512: 0.80}  # per-GPU throughput vs the 32-GPU run
SCALING_TOKENS_PER_GPU = 7600.0  # tokens/s per GPU of the 32-GPU run (~40 % MFU at 5.2e10 FLOPs per token)
SCALING_FIRST_ID = 1_190_000  # below the history's job ids: these ran before it
SCALING_MINUTES = 20
SCALING_DAYS_AGO = 3
SCALING_TELEMETRY_S = 60.0  # their GPU samples: one a minute


def _store():
    from apps.telemetry.store import telemetry_store

    return telemetry_store()


def reset() -> None:
    """The series go from the store; the jobs (and their model configs) go with the jobs part's cluster."""
    try:
        _store().delete_job_series(DEMO_CLUSTER)
    except TelemetryUnavailable:
        pass


def _megatron_run(job, seed: int, onset_s: float | None, evaluation_at_s: float | None) -> synthetic.Run:
    return synthetic.Run(start=job.start_time, global_batch=MEGATRON_MODEL["global_batch"], seq_len=MEGATRON_MODEL["seq_len"],
                         iteration_s=MEGATRON_ITERATION_S, seed=seed, straggler_after_s=onset_s, evaluation_at_s=evaluation_at_s,
                         vocab=MEGATRON_MODEL["vocab"])


def _run_memory(memory: dict) -> dict | None:
    return memory.get("appmetrics_megatron")


def _write(job, frame: pd.DataFrame) -> int:
    from .services import series_write

    return series_write(job, frame)


def _megatron(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    from .services import model_config_set

    key = context.shared.get("megatron_job")
    job = Job.objects.select_related("cluster").filter(cluster__name=key[0], job_id=key[1]).first() if key else None
    if job is None or job.start_time is None:
        return {}
    model_config_set(job, MEGATRON_MODEL, source=JobModelConfigSourceChoices.DEMO)
    now = context.now
    _start, duration, before = window_of_run(job.start_time, now, hours=settings.DEMO_TELEMETRY_HOURS)
    planted = context.shared.get("telemetry_planted") or {}
    onset = planted.get("throttled_after_s")
    if onset is None:  # the telemetry part planted its straggler throughout: the onset it would use
        onset = straggler_onset_s(before, duration)
    # synthetic_jobs: the last 15 minutes of a window of an hour or more evaluate
    evaluation = (now - job.start_time).total_seconds() - 900.0 if duration >= 3600 else None
    run = _megatron_run(job, context.seed, onset, evaluation)
    written = _write(job, synthetic.app_frame(run, DEMO_CLUSTER, job.job_id, end=now))
    context.feed_memory["appmetrics_megatron"] = {"job": job.pk, "onset_s": onset, "evaluation_at_s": evaluation}
    onset_at = synthetic.moment_of(run, onset)
    context.say(f"  appmetrics   {job.name}: {written:,} application points, checkpoints every 30 min, "
                f"straggler onset {onset_at:%H:%M} UTC")
    return {"megatron_points": written, "straggler_onset": onset_at.isoformat()}


def _scaling(context: DemoContext) -> dict:
    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import jobs_upsert
    from apps.jobs.slurm_json import SlurmJob

    from .services import model_config_set

    cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first()
    hostnames = sorted(context.shared.get("hostnames") or [])
    if cluster is None or not hostnames:
        return {}
    memberships = context.shared.get("memberships") or {}
    account = sorted(memberships.get(DEMO_USER) or ["a-llm01"])[0]
    first_start = (context.now - timedelta(days=SCALING_DAYS_AGO)).replace(minute=0)
    records, runs = [], {}
    for index, gpus in enumerate(sorted(SCALING_EFFICIENCY)):
        nodes = hostnames[:gpus // GPUS_PER_NODE]
        start = first_start + timedelta(minutes=45 * index)
        end = start + timedelta(minutes=SCALING_MINUTES)
        name = SCALING_NAME.format(gpus=gpus)
        job_id = SCALING_FIRST_ID + index
        records.append(SlurmJob(
            cluster=DEMO_CLUSTER, job_id=job_id, state="COMPLETED", name=name, user=DEMO_USER, account=account, partition="normal",
            qos="normal", submit_time=start - timedelta(minutes=6), start_time=start, end_time=end, time_limit_minutes=60,
            nodes=_hostlist(nodes), node_list=tuple(nodes), node_count=len(nodes), tasks=gpus, gpus=gpus, exit_code=0,
            working_directory=f"/capstor/scratch/cscs/{DEMO_USER}/apertus-8b-scaling",
            command=(f"sbatch --nodes={len(nodes)} --environment=megatron-lm-core apertus-8b.sbatch "
                     f"--global-batch-size {SCALING_MODEL['global_batch']} --seq-length {SCALING_MODEL['seq_len']}")))
        runs[job_id] = synthetic.Run(
            start=start, global_batch=SCALING_MODEL["global_batch"], seq_len=SCALING_MODEL["seq_len"], seed=context.seed + gpus,
            iteration_s=synthetic.scaling_iteration_s(gpus, 32, SCALING_TOKENS_PER_GPU, SCALING_EFFICIENCY[gpus],
                                                      SCALING_MODEL["global_batch"], SCALING_MODEL["seq_len"]),
            checkpoints=False, startup_s=120.0, vocab=SCALING_MODEL["vocab"], lr_warmup_iters=100)
    jobs_upsert(cluster, records, source="demo")
    points = samples = 0
    for job in Job.objects.select_related("cluster").filter(cluster=cluster, job_id__in=list(runs)).order_by("job_id"):
        model_config_set(job, SCALING_MODEL, source=JobModelConfigSourceChoices.DEMO)
        points += _write(job, synthetic.app_frame(runs[job.job_id], DEMO_CLUSTER, job.job_id, end=job.end_time))
        samples += _small_telemetry(job, context.seed)
    context.say(f"  appmetrics   scaling series {SCALING_NAME.format(gpus=32)} .. {SCALING_NAME.format(gpus=512)}: "
                f"{len(runs)} finished runs of the demo user")
    return {"scaling_runs": len(runs), "scaling_points": points, "scaling_samples": samples}


def _small_telemetry(job, seed: int) -> int:
    """A minute-by-minute GPU history of a scaling run (the demo user's jobs all have telemetry and a score), small:
    20 samples per series."""
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.services import job_telemetry_refresh

    store = _store()
    duration = (job.end_time - job.start_time).total_seconds()
    written = sum(store.write(chunk) for chunk in job_chunks(
        "megatron", list(job.node_list), job.start_time, duration, interval_s=SCALING_TELEMETRY_S, cluster=DEMO_CLUSTER,
        seed=seed + int(job.job_id), planted=Planted(), hosts_per_chunk=64))
    job_telemetry_refresh(job)
    job_saturation_refresh(job)
    return written


def _hostlist(nodes: list[str]) -> str:
    """Slurm's compressed host list of ``nodes`` ("nid[001000-001007]")."""
    import hostlist

    return hostlist.collect_hostlist(nodes)


@demo_part("appmetrics", order=68, reset=reset, weight=4)
def build(context: DemoContext) -> dict:
    try:
        _store().check()
    except TelemetryUnavailable as exc:
        context.say(f"  appmetrics   skipped: {exc}")
        return {}
    return {**_megatron(context), **_scaling(context)}


@demo_feeder("appmetrics", order=68)
def feed(context: FeedContext) -> dict:
    """The Megatron job's rows whose time falls in the span (its run continued, same steps), while it runs."""
    from apps.jobs.models import Job

    memory = _run_memory(context.memory)
    if not memory:
        return {"skipped": "no Megatron job in this demo"}
    job = Job.objects.select_related("cluster").filter(pk=memory["job"]).first()
    if job is None or job.start_time is None:
        return {"skipped": "the Megatron job is gone"}
    end = min(context.end, job.end_time) if job.end_time else context.end
    if end <= context.start:
        return {"points": 0}
    run = _megatron_run(job, context.seed, memory.get("onset_s"), memory.get("evaluation_at_s"))
    try:
        written = _write(job, synthetic.app_frame(run, DEMO_CLUSTER, job.job_id, start=context.start, end=end))
    except TelemetryUnavailable as exc:
        return {"skipped": f"telemetry store unavailable: {exc}"}
    return {"points": written}

