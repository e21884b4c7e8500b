"""Writes of the telemetry app: building a job's data product from the telemetry store."""
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.utils import timezone

from .backends.base import Query
from .models import JobTelemetry, JobTelemetryStatusChoices as Status
from .products import build_cube, choose_step
from .store import telemetry_store


def as_utc(moment):
    """A numpy datetime64 (naive UTC) as an aware datetime; None stays None."""
    if moment is None:
        return None
    return pd.Timestamp(moment).tz_localize("UTC").to_pydatetime()


def product_path(job) -> Path:
    return Path(settings.DATA_DIR) / "telemetry-products" / job.cluster.name / f"{job.job_id}.npz"


def has_product(record: JobTelemetry) -> bool:
    """Whether the record points at a built cube that pages can show."""
    return record.status == Status.STATUS_READY and bool(record.product)


def job_window(job):
    start = job.start_time
    if start is None:
        return None
    end = job.end_time or timezone.now()
    return (start, end) if end > start else None


def job_telemetry_refresh(job, report=lambda done, message: None) -> JobTelemetry:
    """Read the job's nodes over its run time from the telemetry store and save the bucketed cube.
    Idempotent: each run replaces the product. Store errors (TelemetryUnavailable) propagate so the
    task can retry; the record says what happened either way."""
    record, _ = JobTelemetry.objects.get_or_create(job=job)
    window = job_window(job)
    if window is None or not job.node_list:
        record.status, record.message = Status.STATUS_WAITING, "the job has not started on any node yet"
        record.save()
        return record
    start, end = window
    step = choose_step((end - start).total_seconds())
    reading = f"reading {len(job.node_list)} nodes at {step} s buckets"
    if has_product(record):
        # The product on disk stays what pages read until the new one replaces it: a refresh that
        # dies midway (worker killed, store down) leaves the previous heatmap, not a blank section.
        record.message = f"refreshing since {timezone.now():%H:%M:%S} UTC: {reading}"
    else:
        record.status, record.message = Status.STATUS_RUNNING, reading
    record.attempts += 1
    record.save()
    report(10, record.message)
    aggregated = telemetry_store().aggregate(
        Query(start=start, end=end, cluster=job.cluster.name, hosts=tuple(job.node_list)), step)
    report(70, f"{len(aggregated):,} buckets read")
    record.window_start, record.window_end, record.step_seconds = start, end, step
    if aggregated.empty:
        record.status = Status.STATUS_EMPTY
        record.message = "no samples for this job's nodes and run time in the telemetry store"
        record.gpus, record.fields, record.samples, record.product = 0, [], 0, ""
        record.first_sample = record.last_sample = None
        record.gpus_reporting = 0
        record.materialized = timezone.now()
        record.save()
        return record
    cube = build_cube(aggregated, step, list(job.node_list))
    path = product_path(job)
    cube.save(path)
    record.status, record.message = Status.STATUS_READY, ""
    record.gpus, record.fields = len(cube.gpus), [int(f) for f in cube.fields]
    record.samples = int(cube.count.sum())
    first, last, reporting = cube.coverage()
    record.first_sample, record.last_sample = as_utc(first), as_utc(last)
    record.gpus_reporting = reporting
    record.product = str(path.relative_to(settings.DATA_DIR))
    record.materialized = timezone.now()
    record.save()
    report(100, f"{record.samples:,} samples from {record.gpus} GPUs")
    return record
