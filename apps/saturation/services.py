"""Writes of the saturation app: scoring a job from the telemetry store into its product.

The job is read a few nodes at a time (``SATURATION_HOSTS_PER_READ``) as bucket means on the scoring
step — the store aggregates, so 1 Hz collectors cost no more than 10 s ones — plus the raw clock-event
reasons (a bitmask, which has no meaningful mean). A page request never scores: it reads the row and
the product file this writes.
"""
import math
from datetime import timezone as dt_timezone
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.utils import timezone

from apps.telemetry.backends.base import Query
from apps.telemetry.services import job_window
from apps.telemetry.store import telemetry_store

from .models import JobSaturation, JobSaturationStatusChoices as Status
from .products import FIELDS_NEEDED, REASONS_FIELD, SaturationCube, score_job, scoring_step
from .selectors import gpu_model_for_job
from .stragglers import find_stragglers


def product_path(job, version: str = "") -> Path:
    """Where a job's product lives; each scoring writes a new version, so the record and the file it
    names always belong together even when a scoring is killed between writing the file and the row."""
    return Path(settings.DATA_DIR) / "saturation-products" / job.cluster.name / (
        f"{job.job_id}.{version}.npz" if version else f"{job.job_id}.npz")


def _remove_old_products(job, keep: set[str]) -> None:
    """Products of the job other than the current and the previous one (which a reader may still hold)."""
    folder = product_path(job).parent
    for path in list(folder.glob(f"{job.job_id}.npz")) + list(folder.glob(f"{job.job_id}.*.npz")):
        if str(path.relative_to(settings.DATA_DIR)) not in keep and ".tmp." not in path.name:
            path.unlink(missing_ok=True)


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


def locations_of_gpus(pairs) -> dict:
    """(host, gpu) -> {"nic", "switch", "group"} from the current topology (GPU i next to NIC i)."""
    from apps.topology.selectors import topology_index_current

    index = topology_index_current()
    out = {}
    for host, gpu in pairs:
        found = index.nic_of(host, int(gpu))
        if found:
            out[(host, int(gpu))] = {"nic": found.nic, "switch": found.switch_label, "group": found.group}
    return out


def _job_frames(job, start, end, step, report, read: dict):
    """The job's samples, a few nodes at a time: bucket means of the scored fields and the raw reasons.
    ``read["samples"]`` counts the raw samples behind them."""
    store = telemetry_store()
    hosts = list(job.node_list)
    per_read = max(1, settings.SATURATION_HOSTS_PER_READ)
    for first in range(0, len(hosts), per_read):
        chunk = tuple(hosts[first:first + per_read])
        window = dict(start=start, end=end, cluster=job.cluster.name, hosts=chunk)
        means = store.aggregate(Query(**window, fields=FIELDS_NEEDED), step, stats=("mean",))
        reasons = store.read(Query(**window, fields=(REASONS_FIELD,)))
        read["samples"] = read.get("samples", 0) + int(means["count"].sum()) + len(reasons)
        report(5 + int(65 * (first + len(chunk)) / len(hosts)), f"read {first + len(chunk)} of {len(hosts)} nodes")
        yield [means.rename(columns={"bucket": "ts", "mean": "value"}), reasons]


def scoring_begin(job, task_id: str = "") -> JobSaturation:
    """Mark the job as being scored without touching its result: the previous score stays readable."""
    record, _ = JobSaturation.objects.get_or_create(job=job)
    record.scoring_since, record.scoring_task = timezone.now(), task_id[:255]
    record.save(update_fields=["scoring_since", "scoring_task"])
    return record


def scoring_failed(job, reason: str, *, final: bool) -> JobSaturation:
    """A scoring that did not finish: a previous score stays (with the reason next to it); a job
    without one says why it has none, ``failed`` when no retry follows."""
    record, _ = JobSaturation.objects.get_or_create(job=job)
    record.scoring_since, record.scoring_task = None, ""
    if record.status == Status.STATUS_READY:
        when = f"{record.computed:%Y-%m-%d %H:%M} UTC" if record.computed else "an earlier scoring"
        record.message = f"the last scoring did not finish ({reason}); this score is from {when}"[:500]
    else:
        record.status = Status.STATUS_FAILED if final else Status.STATUS_WAITING
        record.message = reason[:500]
    record.save(update_fields=["scoring_since", "scoring_task", "status", "message"])
    return record


def job_saturation_refresh(job, report=lambda done, message: None, task_id: str = "") -> JobSaturation:
    """Score the job's steady state from its samples and find its stragglers; idempotent (each run
    replaces the result). Store errors (TelemetryUnavailable) propagate so the task can retry.

    While it runs the record keeps its previous result and says since when a scoring runs
    (``scoring_since``); the new result replaces the old one in one save at the end."""
    record = scoring_begin(job, task_id)
    window = job_window(job)
    if window is None or not job.node_list:
        record.status, record.message = Status.STATUS_WAITING, "the job has not started on any node yet"
        record.scoring_since, record.scoring_task = None, ""
        record.save()
        return record
    start, end = window
    step = scoring_step((end - start).total_seconds())
    model = gpu_model_for_job(job)
    report(5, f"reading {len(job.node_list)} nodes at {step} s buckets")
    record.window_start, record.window_end = start, end
    read = {"samples": 0}
    try:
        scored = score_job(_job_frames(job, start, end, step, report, read), start=start, end=end, step_s=step,
                           hosts_order=list(job.node_list), model=model)
    except ValueError as exc:
        if "no samples" not in str(exc):
            raise
        record.status, record.message = Status.STATUS_EMPTY, "no telemetry for this job's nodes and run time"
        record.score = None
        record.computed = timezone.now()
        record.scoring_since, record.scoring_task = None, ""
        record.save()
        return record
    report(80, "scored; looking for stragglers")
    summary, cube = scored.summary, scored.cube
    pairs = list(zip(scored.hosts, (int(g) for g in scored.gpus)))
    ranks, places = rank_of_gpus(job), locations_of_gpus(pairs)
    per_gpu = []
    for row, (host, gpu) in enumerate(pairs):
        g = summary.gpus[row]
        rank, place = ranks.get((host, gpu), {}), places.get((host, gpu), {})
        per_gpu.append({"host": host, "gpu": gpu, "rank": rank.get("rank"), "pp": rank.get("pp"), "tp": rank.get("tp"),
                        "dp": rank.get("dp"), "nic": place.get("nic"), "switch": place.get("switch"), "group": place.get("group"),
                        "score": _number(100 * g.score if math.isfinite(g.score) else None, 2),
                        "compute": _number(g.compute), "memory": _number(g.memory), "link": _number(g.link),
                        "limiter": g.limiter, "busy": _number(g.busy), "p10": _number(g.p10), "p50": _number(g.p50),
                        "p90": _number(g.p90), "time_high": _number(g.time_high), "clock_factor": _number(g.clock_factor),
                        "throttled": _number(g.throttled), "label": g.labels[0] if g.labels else ""})
    stragglers = stragglers_of(cube, per_gpu)
    for item in stragglers:
        if item["level"] == "gpu":
            next(g for g in per_gpu if g["host"] == item["host"] and g["gpu"] == item["gpu"])["straggler"] = item["signal"]
        elif item["level"] == "node":
            for g in per_gpu:
                if g["host"] == item["host"]:
                    g["straggler"] = item["signal"]
    previous_product = record.product
    path = product_path(job, timezone.now().strftime("%Y%m%dT%H%M%S%f"))
    cube.save(path)
    record.status, record.message = Status.STATUS_READY, ""
    record.score = _number(summary.score, 1)
    record.compute, record.memory, record.link = _number(summary.compute), _number(summary.memory), _number(summary.link)
    record.limiter, record.labels = summary.limiter, summary.labels
    record.imbalance, record.idle_gpus = _number(summary.imbalance), summary.idle_gpus
    record.energy_j, record.energy_low_j = _number(summary.energy_j, 1), _number(summary.energy_low_j, 1)
    record.steady_start = (cube.warmup_end.astype("datetime64[us]").astype(object).replace(tzinfo=dt_timezone.utc)
                           if cube.warmup_end is not None else None)
    record.samples = read["samples"]
    record.per_gpu, record.stragglers = per_gpu, stragglers
    record.flags = (["idle GPUs"] if summary.idle_gpus else []) + (["straggler"] if stragglers else []) + (
        ["low saturation"] if record.score is not None and record.score < 30 else [])
    record.product = str(path.relative_to(settings.DATA_DIR))
    record.gpu_model, record.step_seconds = model.name, step
    record.computed = timezone.now()
    record.scoring_since, record.scoring_task = None, ""
    record.save()
    _remove_old_products(job, {record.product, previous_product})
    report(100, f"score {record.score} from {len(per_gpu)} GPUs, {len(stragglers)} straggler finding(s)")
    return record


def stragglers_of(cube: SaturationCube, per_gpu: list[dict]) -> list[dict]:
    """Straggler findings on the product's binned signals, peers chosen by the job's layout."""
    gpus = pd.DataFrame(per_gpu, columns=["host", "gpu", "rank", "pp", "tp", "dp", "nic", "switch", "group"])
    signals = {name: cube.values[name] for name in ("S", "busy", "sm_clock", "power", "temperature") if name in cube.values}
    context = {name: cube.values[name] for name in ("power_capped", "thermal") if name in cube.values}
    found = find_stragglers(signals, gpus, interval_s=cube.bin_seconds, times=cube.bin_starts, steady=cube.steady_columns(),
                            context=context)
    return [item.as_dict() for item in found]
