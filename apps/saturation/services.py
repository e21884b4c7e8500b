"""Writes of the saturation app: scoring a job from the telemetry store into its product."""
import math
from datetime import timezone as dt_timezone
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.telemetry.backends.base import Query
from apps.telemetry.services import job_window
from apps.telemetry.store import telemetry_store

from .models import JobSaturation, JobSaturationStatusChoices as Status
from .products import FIELDS_NEEDED, score_samples


def product_path(job) -> Path:
    return Path(settings.DATA_DIR) / "saturation-products" / job.cluster.name / f"{job.job_id}.npz"


def _number(value, digits=4):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else round(float(value), digits)


def rank_of_gpus(job) -> dict:
    """(host, gpu) -> {"rank", "pp", "tp", "dp"} of the rank on it, when the job reported a layout."""
    from apps.ranks.selectors import job_ranks

    try:
        ranks = job_ranks(job)
    except Exception:  # noqa: BLE001 - a layout that no longer fits the topology: score without ranks
        return {}
    if ranks is None:
        return {}
    table = ranks.table
    out = {}
    for rank in range(table.world_size):
        key = (table.hosts[rank], int(table.local_rank[rank]))
        out.setdefault(key, {"rank": rank, **{d: int(table.coords[d][rank]) for d in ("pp", "tp", "dp") if d in table.coords}})
    return out


def job_saturation_refresh(job, report=lambda done, message: None) -> JobSaturation:
    """Score the job's steady state from its raw samples; idempotent (each run replaces the result).
    Store errors (TelemetryUnavailable) propagate so the task can retry."""
    record, _ = JobSaturation.objects.get_or_create(job=job)
    window = job_window(job)
    if window is None or not job.node_list:
        record.status, record.message = Status.STATUS_WAITING, "the job has not started on any node yet"
        record.save()
        return record
    record.status, record.message = Status.STATUS_RUNNING, f"reading {len(job.node_list)} nodes"
    record.save()
    report(5, record.message)
    frame = telemetry_store().read(Query(start=window[0], end=window[1], cluster=job.cluster.name,
                                         hosts=tuple(job.node_list), fields=FIELDS_NEEDED))
    report(50, f"{len(frame):,} samples read")
    record.window_start, record.window_end = window
    if frame.empty:
        record.status, record.message = Status.STATUS_EMPTY, "no telemetry for this job's nodes and run time"
        record.score = None
        record.computed = timezone.now()
        record.save()
        return record
    cube, summary, scores, grid = score_samples(frame, hosts_order=list(job.node_list))
    report(80, "scored")
    ranks = rank_of_gpus(job)
    per_gpu = []
    for row, (host, gpu) in enumerate(zip(grid.hosts, grid.gpus)):
        g = summary.gpus[row]
        rank = ranks.get((host, int(gpu)), {})
        per_gpu.append({"host": host, "gpu": int(gpu), "rank": rank.get("rank"), "pp": rank.get("pp"), "tp": rank.get("tp"),
                        "dp": rank.get("dp"), "score": _number(100 * g.score if math.isfinite(g.score) else None, 2),
                        "compute": _number(g.compute), "memory": _number(g.memory), "link": _number(g.link),
                        "limiter": g.limiter, "busy": _number(g.busy), "p10": _number(g.p10), "p50": _number(g.p50),
                        "p90": _number(g.p90), "time_high": _number(g.time_high), "clock_factor": _number(g.clock_factor),
                        "throttled": _number(g.throttled), "label": g.labels[0] if g.labels else ""})
    stragglers = _stragglers(cube, per_gpu)
    path = product_path(job)
    cube.save(path)
    record.status, record.message = Status.STATUS_READY, ""
    record.score = _number(summary.score, 1)
    record.compute, record.memory, record.link = _number(summary.compute), _number(summary.memory), _number(summary.link)
    record.limiter, record.labels = summary.limiter, summary.labels
    record.imbalance, record.idle_gpus = _number(summary.imbalance), summary.idle_gpus
    record.energy_j, record.energy_low_j = _number(summary.energy_j, 1), _number(summary.energy_low_j, 1)
    record.steady_start = (cube.warmup_end.astype("datetime64[us]").astype(object).replace(tzinfo=dt_timezone.utc)
                           if cube.warmup_end is not None else None)
    record.samples = int(len(frame))
    record.per_gpu, record.stragglers = per_gpu, stragglers
    record.flags = (["idle GPUs"] if summary.idle_gpus else []) + (["straggler"] if stragglers else []) + (
        ["low saturation"] if record.score is not None and record.score < 30 else [])
    record.product = str(path.relative_to(settings.DATA_DIR))
    record.computed = timezone.now()
    record.save()
    report(100, f"score {record.score} from {len(per_gpu)} GPUs")
    return record


def _stragglers(cube, per_gpu) -> list[dict]:
    """Stragglers on the binned signals, when the detector is available (apps.saturation.stragglers)."""
    try:
        from . import stragglers as detector
    except ImportError:
        return []
    import pandas as pd

    gpus = pd.DataFrame(per_gpu)[["host", "gpu", "rank", "pp", "tp", "dp"]]
    signals = {"saturation": cube.values["S"], "busy": cube.values["busy"],
               "sm_clock": cube.values["clock_factor"] * 1980.0}
    found = detector.find_stragglers(signals, gpus, interval_s=cube.bin_seconds) if hasattr(detector, "find_stragglers") else []
    return [item.as_dict() for item in found]

