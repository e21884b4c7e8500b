"""Writes of the saturation app: scoring a job from the telemetry store into its product.

The job is read a few nodes at a time (``SATURATION_HOSTS_PER_READ``) as bucket means on the scoring
step — the store aggregates, so 1 Hz collectors cost no more than 10 s ones — plus the raw clock-event
reasons (a bitmask, which has no meaningful mean). A page request never scores: it reads the row and
the product file this writes.
"""
import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timezone as dt_timezone
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.utils import timezone

from apps.jobs.products import NOT_STARTED, product_window
from apps.telemetry.backends.base import Query
from apps.telemetry.store import telemetry_store

from .choices import JobSaturationStatusChoices as Status
from .models import JobSaturation
from .products import (
    FIELDS_NEEDED, REASONS_FIELD, STATE_ARRAYS, SaturationCube, ScoredColumns, empty_columns, finish_scoring, score_columns,
    scoring_step,
)
from .scoring import GpuModel
from .selectors import gpu_model_for_job
from .state import (
    ScoreState, concatenate_blocks, fingerprint_equal, load_columns, load_state, locked, read_fingerprint, remove_state,
    save_columns, save_state,
)
from .silence import silent_gpus
from .stragglers import find_stragglers

#: ``scoring_task`` of a job whose scoring from scratch runs split in node blocks: this, then the scoring id.
SPLIT_PREFIX = "split:"


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


def _job_frames(job, start, end, step, report, read: dict, hosts=None, per_read: int | None = None):
    """The job's samples, a few nodes at a time: bucket means of the scored fields and the raw reasons.
    ``read["samples"]`` counts the raw samples behind them. ``hosts`` (default: the job's nodes) and
    ``per_read`` (default SATURATION_HOSTS_PER_READ) choose what one store request reads."""
    store = telemetry_store()
    hosts = list(job.node_list) if hosts is None else list(hosts)
    per_read = max(1, per_read or settings.SATURATION_HOSTS_PER_READ)
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


def _scoring_done(record: JobSaturation, task_id: str) -> None:
    """End the scoring mark when it is this scoring's (another one that started meanwhile keeps its own)."""
    JobSaturation.objects.filter(pk=record.pk, scoring_task=task_id[:255]).update(scoring_since=None, scoring_task="")
    record.refresh_from_db(fields=["scoring_since", "scoring_task"])


# ---------------------------------------------------------------------------------------------
# The score state: what a full scoring depends on, where it lives, when columns are final


def state_folder(job) -> Path:
    """The job's score state (``state.py``): full-resolution scores an update extends."""
    return Path(settings.DATA_DIR) / "saturation-state" / job.cluster.name / str(job.job_id)


def _lock_path(job) -> Path:
    return state_folder(job).with_name(f"{job.job_id}.lock")


def reread_seconds() -> float:
    """How far back from the end of its window an update reads again: samples posted up to this late
    (a collector sending a minute at once, a slow batch) still count, as in a full scoring."""
    return float(settings.SATURATION_REREAD_SECONDS)


def complete_columns(origin_ns: int, step_s: float, end) -> int:
    """Columns (from ``origin_ns``, ``step_s`` wide) that end before both the window's end and now minus
    the re-read margin: nothing later arrives for them."""
    limit = min(pd.Timestamp(end).value, pd.Timestamp(timezone.now()).value) - int(reread_seconds() * 1e9)
    return max(0, (limit - int(origin_ns)) // int(round(step_s * 1e9)))


def _model_facts(model: GpuModel) -> dict:
    return {"name": model.name, "ceilings": dict(sorted(model.ceilings.items())),
            "link_peaks": dict(sorted(model.link_peaks.items())), "max_sm_clock_mhz": model.max_sm_clock_mhz}


def score_fingerprint(job, model: GpuModel, step: float, start) -> dict:
    """What a full scoring of the job depends on: its nodes, its layout (it places the ranks), the GPU model
    ceilings, the scoring step and the start of its window. A state with another fingerprint is stale."""
    from apps.ranks.models import JobLayout

    layout = JobLayout.objects.filter(job=job).values_list("pk", "modified").first()
    nodes = list(job.node_list or [])
    return {"nodes": hashlib.sha1("\n".join(nodes).encode()).hexdigest(), "node_count": len(nodes),
            "layout": f"{layout[0]}@{layout[1].isoformat()}" if layout else None, "model": _model_facts(model),
            "step_s": float(step), "start": pd.Timestamp(start).isoformat()}


def _fingerprint_difference(saved: dict, current: dict) -> str:
    words = {"nodes": "the node list", "node_count": "the node list", "layout": "the layout", "model": "the GPU model ceilings",
             "step_s": "the scoring step", "start": "the job's start"}
    changed = sorted({words.get(key, key) for key in set(saved) | set(current) if saved.get(key) != current.get(key)})
    return ", ".join(changed) or "the saved state"


# ---------------------------------------------------------------------------------------------
# Scoring from scratch, in one task


def job_saturation_refresh(job, report=lambda done, message: None, task_id: str = "") -> JobSaturation:
    """Score the job's steady state from its samples and find its stragglers; idempotent (each run
    replaces the result). Store errors (TelemetryUnavailable) propagate so the task can retry.

    While it runs the record keeps its previous result and says since when a scoring runs
    (``scoring_since``); the new result replaces the old one in one save at the end. It also writes
    the job's score state, so the next ``job_saturation_update`` scores only what is new."""
    with locked(_lock_path(job)):
        return _refresh_locked(job, report, task_id)


def _not_started(record: JobSaturation, task_id: str) -> JobSaturation:
    record.status, record.message = Status.STATUS_WAITING, NOT_STARTED
    record.save(update_fields=["status", "message"])
    _scoring_done(record, task_id)
    return record


def _no_telemetry(job, record: JobSaturation, task_id: str) -> JobSaturation:
    remove_state(state_folder(job))
    record.status, record.message = Status.STATUS_EMPTY, "no telemetry for this job's nodes and run time"
    record.score = None
    record.computed = timezone.now()
    record.save(update_fields=["status", "message", "score", "computed", "window_start", "window_end"])
    _scoring_done(record, task_id)
    return record


def _past_raw_retention(job, record: JobSaturation, start, step: int, task_id: str):
    """Issue 40: when the job's raw samples are past their retention, a finished job's score built from them is kept as
    it is (the record returned); a running job, or one never scored, is scored from the rollups that still hold its
    start (the step to score at, a multiple of their resolution). Otherwise ``step`` unchanged."""
    from apps.telemetry.selectors import job_retention, readable_step

    coarse = readable_step(start, step)
    if coarse == step:
        return step
    state = job_retention(job)
    if (record.has_product() and job.end_time is not None) or coarse is None:
        if coarse is None:
            record.status, record.score = Status.STATUS_EMPTY, None
        record.message = (state or {}).get("words", "")[:500]
        record.save(update_fields=["status", "score", "message"])
        _scoring_done(record, task_id)
        return record
    return coarse


def _refresh_locked(job, report, task_id: str) -> JobSaturation:
    record = scoring_begin(job, task_id)
    window = product_window(job)
    if window is None:
        return _not_started(record, task_id)
    start, end = window
    step = scoring_step((end - start).total_seconds())
    kept = _past_raw_retention(job, record, start, step, task_id)
    if isinstance(kept, JobSaturation):
        return kept
    step = kept
    model = gpu_model_for_job(job)
    report(5, f"reading {len(job.node_list)} nodes at {step} s buckets")
    record.window_start, record.window_end = start, end
    read = {"samples": 0}
    try:
        scored = score_columns(_job_frames(job, start, end, step, report, read), start=start, end=end, step_s=step,
                               hosts_order=list(job.node_list), model=model)
    except ValueError as exc:
        if "no samples" not in str(exc):
            raise
        return _no_telemetry(job, record, task_id)
    state = ScoreState.from_columns(scored, fingerprint=score_fingerprint(job, model, step, start), step_s=step,
                                    complete=complete_columns(int(scored.times[0].astype("int64")), step, end))
    record.last_read = {"mode": "full", "start": start, "end": end, "columns": state.columns, "samples": read["samples"]}
    return _publish(job, record, state, model, start=start, end=end, report=report, task_id=task_id)


def _publish(job, record: JobSaturation, state: ScoreState, model: GpuModel, *, start, end, report, task_id: str,
             keep_state: bool = True, from_column: int = 0) -> JobSaturation:
    """Save the state (from ``from_column``), summarise it, bin it, find the stragglers and replace the
    job's result with one save. ``finish_scoring``'s ValueError (no field the score needs) propagates."""
    clock = _Clock(getattr(record, "last_read", None))
    folder = state_folder(job)
    if keep_state:
        save_state(folder, state, from_column=from_column)
    else:
        remove_state(folder)
    report(75, f"summarising {len(state.hosts):,} GPUs x {state.columns:,} columns")
    previous = None
    if from_column and record.product and (Path(settings.DATA_DIR) / record.product).exists():
        try:
            previous = SaturationCube.load(Path(settings.DATA_DIR) / record.product)
        except (OSError, ValueError, KeyError):  # unreadable: bin everything
            previous = None
    clock.lap("save state")
    scored = finish_scoring(state.scored(), previous=previous, changed_from=from_column, final_columns=state.complete)
    clock.lap("summary and bins")
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
    clock.lap("per-GPU table")
    stragglers = stragglers_of(cube, per_gpu, job_nic_evidence(job, start, end, state.step_s))
    clock.lap("stragglers")
    for item in stragglers:
        if item["level"] == "gpu":
            next(g for g in per_gpu if g["host"] == item["host"] and g["gpu"] == item["gpu"])["straggler"] = item["signal"]
        elif item["level"] == "node":
            for g in per_gpu:
                if g["host"] == item["host"]:
                    g["straggler"] = item["signal"]
    silent = silent_gpus(state.hosts, state.gpus, state.arrays, state.origin_ns, state.step_s)
    if silent:  # GPUs whose samples stopped while the job ran on: said on the first screen (panel.py)
        by_gpu = {(g["host"], int(g["gpu"])): g for g in per_gpu}
        for item in silent:
            if (item.host, item.gpu) in by_gpu:
                by_gpu[(item.host, item.gpu)]["silent_from"] = _aware(np.datetime64(item.last_ns, "ns")).isoformat()
    previous_product = record.product
    path = product_path(job, timezone.now().strftime("%Y%m%dT%H%M%S%f"))
    cube.save(path)
    record.window_start, record.window_end = start, end
    record.status, record.message = Status.STATUS_READY, ""
    record.score = _number(summary.score, 1)
    record.compute, record.memory, record.link = _number(summary.compute), _number(summary.memory), _number(summary.link)
    record.limiter, record.labels = summary.limiter, summary.labels
    record.imbalance, record.idle_gpus = _number(summary.imbalance), summary.idle_gpus
    record.energy_j, record.energy_low_j = _number(summary.energy_j, 1), _number(summary.energy_low_j, 1)
    record.steady_start = _aware(cube.warmup_end)
    record.steady_found = bool(summary.steady_found)
    record.scored_until = _aware(scored.times[-1] + np.timedelta64(int(round(scored.interval_s * 1e9)), "ns"))
    record.samples = state.samples
    record.per_gpu, record.stragglers = per_gpu, stragglers
    record.flags = (["idle GPUs"] if summary.idle_gpus else []) + (["straggler"] if stragglers else []) + (
        ["low saturation"] if record.score is not None and record.score < 30 else []) + (
        ["utilisation only"] if summary.limited else []) + (["silent GPUs"] if silent else [])
    record.product = str(path.relative_to(settings.DATA_DIR))
    record.gpu_model, record.step_seconds = model.name, int(round(state.step_s))
    record.computed = timezone.now()
    record.save(update_fields=[name for name in _RESULT_FIELDS])
    _scoring_done(record, task_id)
    _remove_old_products(job, {record.product, previous_product})
    clock.lap("product and row")
    report(100, f"score {record.score} from {len(per_gpu)} GPUs, {len(stragglers)} straggler finding(s)")
    return record


_RESULT_FIELDS = ("window_start", "window_end", "status", "message", "score", "compute", "memory", "link", "limiter", "labels",
                  "imbalance", "idle_gpus", "energy_j", "energy_low_j", "steady_start", "steady_found", "scored_until", "samples", "per_gpu",
                  "stragglers", "flags", "product", "gpu_model", "step_seconds", "computed")


class _Clock:
    """Seconds spent in each part of a scoring, kept in ``record.last_read["timings"]`` (what the bench prints)."""

    def __init__(self, read: dict | None):
        self.timings = read.setdefault("timings", {}) if isinstance(read, dict) else {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(self.timings.get(name, 0.0) + now - self.last, 4)
        self.last = now


def _aware(moment):
    return None if moment is None else np.datetime64(moment, "us").astype(object).replace(tzinfo=dt_timezone.utc)


# ---------------------------------------------------------------------------------------------
# Updating: only what is new


def job_saturation_update(job, report=lambda done, message: None, *, full: bool = False, task_id: str = "",
                          split: bool = True) -> JobSaturation:
    """Bring the job's saturation product up to date with what the store received since the last scoring;
    idempotent (the job's refresher: ``apps.core.refresh``).

    From the job's score state it reads only the columns after the last final one (re-reading the last
    ``reread_seconds()``, where late samples may still land), scores them, splices them in and then
    summarises, bins and looks for stragglers over the whole job as a full scoring does — the same
    result, at the cost of the new samples plus the summary. It scores from scratch instead when there
    is no state, when what a scoring depends on changed (nodes, layout, ceilings, the job's start), when
    the job's length calls for another step, or on request (``full``). From scratch, a job of at least
    ``SATURATION_SPLIT_MIN_NODES`` nodes is handed to a split scoring (a Celery chord of node blocks,
    ``split=False`` scores it here) and this returns at once; while such a scoring runs, an update leaves the
    job to it (the merge brings the product up to date; the next batch of samples updates from there)."""
    with locked(_lock_path(job)), ThreadPoolExecutor(1) as loader:
        record, _ = JobSaturation.objects.get_or_create(job=job)
        if split_in_flight(record):
            report(100, "a scoring from scratch in node blocks runs; it brings the product up to date")
            return record
        window = product_window(job)
        reason = "asked for" if full else ""
        if window is not None and not reason:
            start, end = window
            step = scoring_step((end - start).total_seconds())
            model = gpu_model_for_job(job)
            fingerprint = score_fingerprint(job, model, step, start)
            meta = read_fingerprint(state_folder(job))
            step_ns = int(round(step * 1e9))
            if meta is None:
                reason = "no score state yet"
            elif not fingerprint_equal(meta["fingerprint"], fingerprint):
                reason = f"{_fingerprint_difference(meta['fingerprint'], fingerprint)} changed"
            elif int(meta["origin_ns"]) + int(meta["complete"]) * step_ns > pd.Timestamp(end).value:
                reason = "the job's end moved before the columns already scored"
            else:
                complete = int(meta["complete"])
                first_ns = int(meta["origin_ns"]) + complete * step_ns
                columns = max(0, math.ceil((pd.Timestamp(end).value - first_ns) / step_ns))
                # The final columns load (a copy of plain arrays) while the store is read for the new ones.
                began = time.perf_counter()
                loading = loader.submit(load_state, state_folder(job), upto=complete, width=complete + columns)
                new, read = _score_new_columns(job, first_ns, columns, complete, end=end, step=step, model=model, report=report)
                scored_new = time.perf_counter()
                state = loading.result()
                read["timings"] = {"read and score new columns": round(scored_new - began, 4),
                                   "wait for the state": round(time.perf_counter() - scored_new, 4)}
                if state is not None and state.complete == complete:
                    return _update_locked(job, record, state, new, read, model, start=start, end=end, step=step,
                                          report=report, task_id=task_id)
                reason = "the score state is unreadable"
        if split and window is not None and split_wanted(job):
            from .tasks import start_split_scoring

            start_split_scoring(job, reason=reason or "scoring from scratch")
            report(100, f"scoring from scratch in node blocks ({reason})")
            return JobSaturation.objects.get(pk=record.pk)
        report(1, f"scoring from scratch: {reason}" if reason else "scoring from scratch")
        return _refresh_locked(job, report, task_id)


def _score_new_columns(job, first_ns: int, columns: int, complete: int, *, end, step, model: GpuModel, report):
    """Read and score the ``columns`` columns from ``first_ns`` on (the state's column ``complete``)."""
    read_start = pd.Timestamp(first_ns, tz="UTC").to_pydatetime()
    hosts = list(job.node_list)
    # A few columns of every node fit in one store request as well as the whole run of a few nodes.
    per_read = max(settings.SATURATION_HOSTS_PER_READ,
                   settings.SATURATION_HOSTS_PER_READ * (complete + columns) // max(1, columns))
    read = {"samples": 0, "start": read_start, "columns": columns}
    report(5, f"reading {len(hosts)} nodes from {read_start:%H:%M:%S} UTC ({columns} new columns of {step} s)")
    new = None
    if columns:
        try:
            new = score_columns(_job_frames(job, read_start, end, step, report, read, per_read=per_read), start=read_start,
                                end=end, step_s=step, hosts_order=hosts, model=model)
        except ValueError as exc:
            if "no samples" not in str(exc):
                raise
    if new is None:  # nothing arrived: the columns are there, empty, so the state still says how far it was read
        step_ns = int(round(step * 1e9))
        times = (first_ns + np.arange(columns, dtype=np.int64) * step_ns).astype("datetime64[ns]")
        new = ScoredColumns(np.array([], dtype=object), np.array([], dtype="int16"), times, float(step),
                            {name: empty_columns(name, (0, columns)) for name in STATE_ARRAYS}, np.zeros(columns, dtype=np.int64))
    return new, read


def _update_locked(job, record: JobSaturation, state: ScoreState, new: ScoredColumns, read: dict, model: GpuModel, *,
                   start, end, step, report, task_id: str) -> JobSaturation:
    first = state.complete
    began = time.perf_counter()
    state.splice(first, new, list(job.node_list), complete=complete_columns(state.origin_ns, step, end))
    record.last_read = {"mode": "incremental", "start": read["start"], "end": end, "columns": read["columns"],
                        "samples": read["samples"], "timings": {**read.get("timings", {}), "splice": round(time.perf_counter() - began, 4)}}
    return _publish(job, record, state, model, start=start, end=end, report=report, task_id=task_id, from_column=first)


# ---------------------------------------------------------------------------------------------
# Scoring from scratch in node blocks (the tasks in tasks.py run these; see the README)


def split_wanted(job) -> bool:
    return len(job.node_list or []) >= max(1, settings.SATURATION_SPLIT_MIN_NODES)


def split_in_flight(record: JobSaturation) -> bool:
    """A split scoring of the job was started and has not ended (nor been declared lost by the sweeper)."""
    return bool(record.scoring_since and record.scoring_task.startswith(SPLIT_PREFIX))


def split_folder(job, scoring_id: str) -> Path:
    return state_folder(job).with_name(f"{job.job_id}.split-{scoring_id}")


def split_plan(job, scoring_id: str, *, block_nodes: int | None = None, run_pk: int | None = None) -> dict | None:
    """Fix what every block of a split scoring reads — the window, the step, the ceilings, the node blocks —
    in ``plan.json`` of the scoring's folder. None when the job has not started on any node."""
    window = product_window(job)
    if window is None:
        return None
    start, end = window
    step = scoring_step((end - start).total_seconds())
    model = gpu_model_for_job(job)
    block_nodes = max(1, block_nodes or settings.SATURATION_BLOCK_NODES)
    hosts = list(job.node_list)
    plan = {"job": job.pk, "scoring_id": scoring_id, "start": pd.Timestamp(start).isoformat(), "end": pd.Timestamp(end).isoformat(),
            "step_s": step, "model": dataclasses.asdict(model), "fingerprint": score_fingerprint(job, model, step, start),
            "block_nodes": block_nodes, "blocks": math.ceil(len(hosts) / block_nodes), "hosts": hosts, "run": run_pk}
    folder = split_folder(job, scoring_id)
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / "plan.json.tmp"
    temporary.write_text(json.dumps(plan, default=str))
    os.replace(temporary, folder / "plan.json")
    return plan


def read_plan(job, scoring_id: str) -> dict | None:
    try:
        return json.loads((split_folder(job, scoring_id) / "plan.json").read_text())
    except (OSError, ValueError):
        return None


def _plan_model(plan: dict) -> GpuModel:
    facts = dict(plan["model"])
    facts["matches"] = tuple(facts.get("matches") or ())
    return GpuModel(**facts)


def score_block(job, scoring_id: str, block: int) -> dict:
    """Score one node block of a split scoring on the plan's grid into its file; a block whose file exists
    is done (a message delivered again does nothing). Store errors propagate (the task retries)."""
    plan = read_plan(job, scoring_id)
    if plan is None:
        return {"block": block, "status": "no plan"}
    path = split_folder(job, scoring_id) / f"block-{block:04d}.npz"
    if path.is_file():
        return {"block": block, "status": "done before"}
    hosts = plan["hosts"][block * plan["block_nodes"]:(block + 1) * plan["block_nodes"]]
    start, end, step = pd.Timestamp(plan["start"]), pd.Timestamp(plan["end"]), plan["step_s"]
    read = {"samples": 0}
    try:
        scored = score_columns(_job_frames(job, start, end, step, lambda done, message: None, read, hosts=hosts), start=start,
                               end=end, step_s=step, hosts_order=plan["hosts"], model=_plan_model(plan))
    except ValueError as exc:
        if "no samples" not in str(exc):
            raise
        step_ns = int(round(step * 1e9))
        first = start.value // step_ns * step_ns
        columns = max(1, math.ceil((end.value - first) / step_ns))
        scored = ScoredColumns(np.array([], dtype=object), np.array([], dtype="int16"),
                               (first + np.arange(columns, dtype=np.int64) * step_ns).astype("datetime64[ns]"), float(step),
                               {name: empty_columns(name, (0, columns)) for name in STATE_ARRAYS}, np.zeros(columns, dtype=np.int64))
    save_columns(path, scored)
    return {"block": block, "status": "scored", "gpus": len(scored.hosts), "samples": read["samples"]}


def merge_blocks(job, scoring_id: str, report=lambda done, message: None, task_id: str = "") -> JobSaturation | None:
    """Put a split scoring's blocks together in node order into the job's state and product, exactly as a
    scoring in one task would; then remove the blocks. None when the scoring's plan is gone (merged before)."""
    with locked(_lock_path(job)):
        plan = read_plan(job, scoring_id)
        if plan is None:
            return None
        folder = split_folder(job, scoring_id)
        record, _ = JobSaturation.objects.get_or_create(job=job)
        start, end = pd.Timestamp(plan["start"]).to_pydatetime(), pd.Timestamp(plan["end"]).to_pydatetime()
        blocks = [load_columns(folder / f"block-{block:04d}.npz") for block in range(plan["blocks"])]
        report(60, f"merging {len(blocks)} blocks")
        task_id = task_id or f"{SPLIT_PREFIX}{scoring_id}"
        try:
            scored = concatenate_blocks(blocks)
        except ValueError as exc:
            if "no samples" not in str(exc):
                raise
            record.window_start, record.window_end = start, end
            result = _no_telemetry(job, record, task_id)
        else:
            step = plan["step_s"]
            state = ScoreState.from_columns(scored, fingerprint=plan["fingerprint"], step_s=step,
                                            complete=complete_columns(int(scored.times[0].astype("int64")), step, end))
            record.last_read = {"mode": "split", "start": start, "end": end, "columns": state.columns, "samples": state.samples}
            result = _publish(job, record, state, _plan_model(plan), start=start, end=end, report=report, task_id=task_id)
        shutil.rmtree(folder, ignore_errors=True)
        return result


def prune_states(*, ended_before, stale_before) -> list[str]:
    """Remove the score states of jobs that ended before ``ended_before`` (or are gone) and the blocks of
    split scorings not touched since ``stale_before`` (their merge never came). A state being written is
    left alone. Returns what was removed, as ``cluster/job_id`` (``+split`` for blocks)."""
    from apps.jobs.models import Job

    root = Path(settings.DATA_DIR) / "saturation-state"
    removed = []
    for cluster_dir in sorted(root.glob("*")) if root.exists() else []:
        if not cluster_dir.is_dir():
            continue
        for folder in sorted(cluster_dir.iterdir()):
            if not folder.is_dir():
                continue
            name, _, split = folder.name.partition(".split-")
            if not name.isdigit():
                continue
            if split:
                if folder.stat().st_mtime < stale_before.timestamp():
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(f"{cluster_dir.name}/{name}+split")
                continue
            job = Job.objects.filter(cluster__name=cluster_dir.name, job_id=int(name)).only("end_time").first()
            if job is not None and (job.end_time is None or job.end_time >= ended_before):
                continue
            try:
                with locked(cluster_dir / f"{name}.lock", timeout=0):
                    remove_state(folder)
            except TimeoutError:
                continue
            (cluster_dir / f"{name}.lock").unlink(missing_ok=True)
            removed.append(f"{cluster_dir.name}/{name}")
    return removed


NIC_EVIDENCE_MIN_STEP = 60  # seconds: NIC counters are read in buckets at least this wide (rates need two samples)


def job_nic_evidence(job, start, end, step_s: float) -> dict[str, list[dict]]:
    """host -> the job's NIC outliers on it (``apps.telemetry.nic_analysis``) over [start, end), read from the
    store's network samples; empty when the store keeps none for the job (or no network table at all)."""
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.nic_analysis import LINK_UP, NIC_COUNTERS, nic_outliers, nic_rates, outliers_by_host

    hosts = list(job.node_list or [])
    if not hosts or start is None or end is None:
        return {}
    from apps.telemetry.selectors import readable_step

    step = max(NIC_EVIDENCE_MIN_STEP, int(math.ceil(step_s or 0)))
    step = readable_step(start, step) or step  # never finer than the tier that still holds the window
    try:
        frame = telemetry_store().aggregate_net(job.cluster.name, step, hosts=hosts, fields=[*NIC_COUNTERS, LINK_UP],
                                                start=start, end=end)
    except (TelemetryUnavailable, ValueError):  # ValueError: retention.TierError, nothing of the window kept
        return {}
    return outliers_by_host(nic_outliers(nic_rates(frame, step)))


def stragglers_of(cube: SaturationCube, per_gpu: list[dict], nic_evidence: dict | None = None) -> list[dict]:
    """Straggler findings on the product's binned signals, peers chosen by the job's layout; ``nic_evidence``
    (host -> NIC outliers) names the NIC behind a lagging node and adds the NICs that stand out on their own."""
    gpus = pd.DataFrame(per_gpu, columns=["host", "gpu", "rank", "pp", "tp", "dp", "nic", "switch", "group"])
    signals = {name: cube.values[name] for name in ("S", "busy", "sm_clock", "power", "temperature") if name in cube.values}
    context = {name: cube.values[name] for name in ("power_capped", "thermal") if name in cube.values}
    found = find_stragglers(signals, gpus, interval_s=cube.bin_seconds, times=cube.bin_starts, steady=cube.steady_columns(),
                            context=context, nic_evidence=nic_evidence)
    return [item.as_dict() for item in found]
