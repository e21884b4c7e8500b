"""The PDF job report: gather a job's facts (the job, its saturation, its efficiency, its application series and GPU
activity), draw them with ``report_pdf`` (plain), keep the file under ``DATA_DIR/appmetrics-reports/`` and record
how the build goes on the job's ``JobReport`` (status, progress, message, pages).

A report is asked for (:func:`report_request`: one build at a time per job; a build already waiting or being built is
not queued again) and built by the worker (``appmetrics.build_report`` -> :func:`report_build`). Building is
idempotent: it draws from what the database and the telemetry store hold now and replaces the file in one rename, so a
redelivered message only draws the same report again.
"""
from __future__ import annotations

import logging
import os
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.gpu_models import gpu_model_for
from apps.core.numbers import duration_words
from apps.core.tasks import stale_cutoff
from apps.saturation.models import JobSaturation
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.selectors import job_cube

from . import efficiency as eff
from . import report_pdf, selectors
from .series import thin
from .choices import JobReportStatusChoices as Status
from .models import JobReport

log = logging.getLogger(__name__)

#: At most this many points per curve in the PDF (evenly thinned; a dip lasts many points at this density).
MAX_POINTS = 2000
REPORTS_FOLDER = "appmetrics-reports"
IN_FLIGHT = (Status.WAITING, Status.BUILDING)


# ---------------------------------------------------------------------------------------------------------------
# Where the file lives


def report_file_path(job) -> Path:
    return Path(settings.DATA_DIR) / REPORTS_FOLDER / job.cluster.name / f"{job.job_id}.pdf"


def report_file(report: JobReport) -> Path | None:
    """The built file, or None when there is none (not built, or gone from the data folder)."""
    if report.status != Status.READY or not report.path:
        return None
    path = Path(settings.DATA_DIR) / report.path
    return path if path.is_file() else None


def report_body(job, report: JobReport | None) -> dict:
    """The API's status body: {"job", "status", "progress", "message", "requested", "built", "pages", "pdf"}."""
    job_id = f"{job.cluster.name}/{job.job_id}"
    if report is None:
        return {"job": job_id, "status": "none", "progress": 0, "message": "No report yet: POST here to build one.",
                "requested": None, "built": None, "pages": 0, "pdf": None}
    ready = report_file(report) is not None
    return {"job": job_id, "status": report.status, "progress": report.progress, "message": report.message,
            "requested": report.requested.isoformat() if report.requested else None,
            "built": report.built.isoformat() if report.built else None, "pages": report.pages,
            "pdf": f"/api/v1/jobs/{job_id}/report.pdf" if ready else None}


# ---------------------------------------------------------------------------------------------------------------
# Asking for a report


def report_get(job) -> JobReport | None:
    return JobReport.objects.filter(job=job).first()


def report_request(job) -> tuple[JobReport, bool]:
    """Ask for the job's report to be built: (the report row, whether a build was queued now).

    A build already waiting or being built is not queued twice, unless it made no progress for longer than any task
    may run (its worker was lost: ``TASK_STALE_SECONDS``). The task is queued once the row is committed."""
    from .tasks import build_report_task

    with transaction.atomic():
        report, created = JobReport.objects.select_for_update().get_or_create(job=job)
        if not created and report.status in IN_FLIGHT and report.requested and report.requested >= stale_cutoff():
            return report, False
        report.status, report.progress = Status.WAITING, 0
        report.message = "waiting for a worker"
        report.requested = timezone.now()
        report.save(update_fields=["status", "progress", "message", "requested"])
    transaction.on_commit(lambda: build_report_task.delay(report.pk))
    return report, True


def _progress(report_pk: int, percent: int, words: str) -> None:
    JobReport.objects.filter(pk=report_pk).update(progress=max(0, min(100, int(percent))), message=words[:500])


# ---------------------------------------------------------------------------------------------------------------
# The facts


def _iso(value) -> str | None:
    if value is None:
        return None
    stamp = pd.Timestamp(value)
    if pd.isna(stamp):
        return None
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")).isoformat()


def _thin(length: int) -> np.ndarray:
    return thin(length, MAX_POINTS)


def _where(item: dict) -> str:
    level = item.get("level") or "gpu"
    if level == "gpu":
        return f"GPU {item.get('gpu')} of {item.get('host')}" + (f" (rank {item['rank']})" if item.get("rank") is not None else "")
    if level == "node":
        return f"node {item.get('host')}, all its GPUs"
    if level == "switch":
        return f"switch {item.get('switch')}"
    return f"dragonfly group {item.get('group')}"


def saturation_facts(job) -> dict:
    record = JobSaturation.objects.filter(job=job).first()
    if record is None or record.score is None:
        status = record.get_status_display().lower() if record is not None else "never scored"
        why = (record.message if record is not None and record.message else
               "the job's GPU telemetry has not been scored yet") + f" ({status})"
        return {"missing": why, "stragglers": None}
    per_gpu = record.per_gpu or []
    return {
        "score": record.score, "limiter": record.limiter, "labels": list(record.labels or []), "idle_gpus": record.idle_gpus,
        "compute": record.compute, "memory": record.memory, "link": record.link,
        "per_gpu": [g.get("score") for g in per_gpu if g.get("score") is not None],
        "straggler_scores": [g.get("score") for g in per_gpu if g.get("straggler") is not None and g.get("score") is not None],
        "stragglers": [{"where": _where(item), "start": item.get("start"), "reason": item.get("reason") or ""}
                       for item in record.stragglers or []],
    }


def throughput_facts(job) -> dict:
    """The tokens/s curve the efficiency is computed from (logged, or derived from iteration time)."""
    try:
        series = selectors.job_series(job, names=["tokens_per_s", "iteration_s"])
    except TelemetryUnavailable as exc:
        return {"missing": f"the telemetry store is unavailable: {exc}"}
    ts, values, source = selectors.job_throughput(series, selectors.model_config_of(selectors.model_config(job)))
    if not len(ts):
        why = ("the job logged no application metrics (tokens_per_s or iteration_s)" if not len(series)
               else "iteration_s is logged but the model config has no global batch to turn it into tokens/s")
        return {"missing": why}
    step = _thin(len(ts))
    stamps = pd.to_datetime(ts[step], utc=True)
    return {"ts": [stamp.to_pydatetime() for stamp in stamps], "tokens_per_s": [float(v) for v in values[step]], "source": source}


def activity_facts(job) -> dict:
    """Per telemetry bucket over the job's GPUs: mean SM and tensor activity, and the share of GPUs idle."""
    cube = job_cube(job, (eff.SM_FIELD, eff.TENSOR_FIELD))
    if cube is None:
        return {"missing": "no GPU telemetry product for this job yet"}
    arrays = eff.evidence_arrays(list(cube.fields), cube.mean, cube.max, cube.labels())
    if cube.field_index(eff.SM_FIELD) is None:
        return {"missing": "no SM activity (DCGM field 1002) in this job's telemetry"}
    sm = arrays["sm_active"]
    filled = np.flatnonzero(np.isfinite(sm))
    if not len(filled):
        return {"missing": "the job's telemetry holds no samples"}
    keep = slice(int(filled[0]), int(filled[-1]) + 1)
    times = cube.buckets.astype("datetime64[ns]")[keep]
    step = _thin(len(times))

    def values(array) -> list[float | None]:
        return [None if not np.isfinite(v) else float(v) for v in np.asarray(array, dtype=float)[keep][step]]

    return {"ts": [stamp.to_pydatetime() for stamp in pd.to_datetime(times[step], utc=True)], "sm": values(sm),
            "tensor": values(arrays["tensor_active"]), "idle_share": values(arrays["idle_share"])}


def job_facts(job) -> dict:
    gpu_model = gpu_model_for(job)
    elapsed = job.elapsed
    return {"id": f"{job.cluster.name}/{job.display_id}", "name": job.name, "user": job.user_name, "account": job.account,
            "state": job.state, "partition": job.partition, "gpus": selectors.job_gpus(job),
            "nodes": job.node_count or len(job.node_list or []) or None,
            "gpu_model": getattr(gpu_model, "name", None) or "", "start": _iso(job.start_time), "end": _iso(job.end_time),
            "elapsed": duration_words(elapsed) if elapsed is not None else "", "environment": job.environment}


def report_sections_facts(job) -> list[dict]:
    """The pages higher apps add to the report (``apps.core.report_pages``: the job's training campaign), as plain data;
    a section that fails is left out and logged."""
    from apps.core.report_pages import report_sections

    out = []
    for key, fn in report_sections():
        try:
            section = fn(job)
        except Exception as exc:  # noqa: BLE001 - the rest of the report is still worth having
            log.warning("report of %s: section %s failed: %s", job, key, exc)
            continue
        if section:
            out.append(section)
    return out


def report_facts(job, progress: Callable[[int, str], None] | None = None) -> dict:
    """Everything the report shows, as plain data (``report_pdf``'s contract); a part that fails says why instead."""
    tell = progress or (lambda percent, words: None)
    facts: dict = {"job": job_facts(job), "generated": datetime.now(dt_timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    facts["saturation"] = saturation_facts(job)
    tell(5, "saturation read")
    try:
        facts["efficiency"] = selectors.job_efficiency(job)
    except Exception as exc:  # noqa: BLE001 - the rest of the report is still worth having; the reason is printed
        log.warning("report of %s: efficiency failed: %s", job, exc)
        facts["efficiency"], facts["efficiency_missing"] = None, f"{type(exc).__name__}: {exc}"
    tell(15, "efficiency computed")
    facts["throughput"] = throughput_facts(job)
    facts["activity"] = activity_facts(job)
    facts["sections"] = report_sections_facts(job)
    tell(25, "series read")
    return facts


# ---------------------------------------------------------------------------------------------------------------
# Building


def report_build(report_pk: int) -> JobReport:
    """Build the report of ``JobReport`` ``report_pk`` now: facts, PDF, the file in place, the row ready (or failed
    with the reason). Returns the row as it ended."""
    report = JobReport.objects.select_related("job", "job__cluster").get(pk=report_pk)
    job = report.job
    JobReport.objects.filter(pk=report_pk).update(status=Status.BUILDING, progress=1, message="gathering the job's facts")

    def tell(percent: int, words: str) -> None:
        _progress(report_pk, percent, words)

    target = report_file_path(job)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        facts = report_facts(job, progress=lambda p, w: tell(p, w))
        target.parent.mkdir(parents=True, exist_ok=True)
        pages = report_pdf.render_report(facts, partial, progress=lambda p, w: tell(25 + int(p * 0.7), w))
        os.replace(partial, target)
    except Exception as exc:
        partial.unlink(missing_ok=True)
        log.exception("report of %s failed", job)
        JobReport.objects.filter(pk=report_pk).update(status=Status.FAILED, message=f"{type(exc).__name__}: {exc}"[:500])
        raise
    JobReport.objects.filter(pk=report_pk).update(
        status=Status.READY, progress=100, pages=pages, built=timezone.now(),
        path=str(target.relative_to(settings.DATA_DIR)), message=f"{pages} pages")
    report.refresh_from_db()
    return report
