"""Writes of the telemetry app: building a job's data product from the telemetry store, and telling the
jobs a batch of samples reached that their products are out of date.

Two ways to bring a job's cube up to date:

* :func:`job_telemetry_refresh` — the whole cube from the store (beat's safety net, and whenever the
  incremental rules below say so);
* :func:`job_telemetry_update` — the refresher registered with apps.core (``order=10``), run seconds
  after samples arrive: it reads only the buckets from the last partial one on (and from the earliest
  late sample, ``pending_from``), appends them to the saved cube and keeps everything before.

Ingestion: :func:`ingest_samples` stores a parsed batch (within the caller's :func:`ingest_scope`), records
it and calls :func:`samples_arrived`, which finds the running (or just ended) jobs whose nodes and run time
the batch covers (``selectors.jobs_touched``), records the last sample per source on each, and marks them
dirty (apps.core.live).
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Least
from django.utils import timezone

from apps.jobs.products import NOT_STARTED, product_window

from .backends.base import Query
from .choices import JobTelemetryStatusChoices as Status
from .ingest import Scope
from .models import IngestBatch, JobTelemetry
from .products import align_cube, build_cube, choose_step, extend_saved_cube, node_digest, read_head
from .selectors import jobs_touched
from .store import telemetry_store

logger = logging.getLogger(__name__)

# What the refresh writes; ``sources`` and ``pending_from`` belong to ingestion and are never saved from a
# record read before the store (that would undo a batch that arrived meanwhile).
PRODUCT_FIELDS = ["status", "message", "attempts", "updated", "materialized", "window_start", "window_end",
                  "step_seconds", "gpus", "fields", "samples", "first_sample", "last_sample", "gpus_reporting", "product"]


def _quiet(done, message=""):
    return None


def as_utc(moment):
    """A numpy datetime64 (naive UTC) as an aware datetime; None stays None."""
    if moment is None:
        return None
    return pd.Timestamp(moment).tz_localize("UTC").to_pydatetime()


def as_naive64(moment) -> np.datetime64:
    """An aware datetime as the naive UTC datetime64[ns] cubes hold."""
    return np.datetime64(pd.Timestamp(moment).tz_convert("UTC").tz_localize(None).to_datetime64(), "ns")


def bucket_floor(moment: datetime, step: int) -> datetime:
    """The start of the epoch-aligned bucket of ``step`` seconds holding ``moment`` (as the stores bucket)."""
    nanos = pd.Timestamp(moment).value
    width = int(step) * 1_000_000_000
    return pd.Timestamp(nanos - nanos % width, tz="UTC").to_pydatetime()


def product_path(job) -> Path:
    return Path(settings.DATA_DIR) / "telemetry-products" / job.cluster.name / f"{job.job_id}.cube"


# -- pending_from: late samples ----------------------------------------------------------------------

def _take_pending(record: JobTelemetry):
    """Clear and return the record's ``pending_from`` (atomically: a batch that lowers it meanwhile wins,
    and its value is read again). None when nothing is pending."""
    for _ in range(5):
        value = JobTelemetry.objects.filter(pk=record.pk).values_list("pending_from", flat=True).first()
        if value is None:
            return None
        if JobTelemetry.objects.filter(pk=record.pk, pending_from=value).update(pending_from=None):
            return value
    return None


def _give_back_pending(record: JobTelemetry, value) -> None:
    """A refresh that failed after taking ``pending_from`` puts it back (the earliest of the two wins)."""
    if value is not None:
        JobTelemetry.objects.filter(pk=record.pk).update(
            pending_from=Least(Coalesce(F("pending_from"), Value(value)), Value(value)))


# -- the whole cube -----------------------------------------------------------------------------------

def job_telemetry_refresh(job, report=_quiet) -> JobTelemetry:
    """Read the job's nodes over its run time from the telemetry store and save the bucketed cube.
    Idempotent: each run replaces the product. Store errors (TelemetryUnavailable) propagate so the
    task can retry; the record says what happened either way."""
    record, _ = JobTelemetry.objects.get_or_create(job=job)
    window = product_window(job)
    if window is None:
        record.status, record.message = Status.STATUS_WAITING, NOT_STARTED
        record.save(update_fields=PRODUCT_FIELDS)
        return record
    start, end = window
    step = choose_step((end - start).total_seconds())
    store = telemetry_store()
    now = store.now()
    if start < store.retention.horizon("raw", now):
        # Raw samples of (part of) the job are past their retention: a finished job's product built from them is kept
        # as it is (issue 40: finished jobs stay explainable); a running job's, or one never built, comes from the
        # rollups that still hold its start (and the raw samples after the horizon).
        if record.has_product() and job.end_time is not None:
            record.message = retention_words(job, store, now, record)
            record.save(update_fields=PRODUCT_FIELDS)
            return record
        coarse = store.retention.step_for(start, now, step)
        if coarse is None:
            record.status, record.message = Status.STATUS_EMPTY, retention_words(job, store, now, record)
            record.window_start, record.window_end, record.step_seconds = start, end, step
            record.materialized = timezone.now()
            record.save(update_fields=PRODUCT_FIELDS)
            return record
        step = coarse
    reading = f"reading {len(job.node_list)} nodes at {step} s buckets"
    if record.has_product():
        # The product on disk stays what pages read until the new one replaces it: a refresh that
        # dies midway (worker killed, store down) leaves the previous heatmap, not a blank section.
        record.message = f"refreshing since {timezone.now():%H:%M:%S} UTC: {reading}"
    else:
        record.status, record.message = Status.STATUS_RUNNING, reading
    record.attempts += 1
    record.save(update_fields=PRODUCT_FIELDS)
    report(10, record.message)
    pending = _take_pending(record)  # the whole window is read: late samples included
    try:
        aggregated = store.aggregate(Query(start=start, end=end, cluster=job.cluster.name, hosts=tuple(job.node_list)),
                                     step)
        report(70, f"{len(aggregated):,} buckets read")
        record.window_start, record.window_end, record.step_seconds = start, end, step
        if aggregated.empty:
            record.status = Status.STATUS_EMPTY
            record.message = "no samples for this job's nodes and run time in the telemetry store"
            record.gpus, record.fields, record.samples = 0, [], 0
            record.first_sample = record.last_sample = None
            record.gpus_reporting = 0
            record.materialized = timezone.now()
            _replace_product(record, "")
            record.save(update_fields=PRODUCT_FIELDS)
            return record
        cube = build_cube(aggregated, step, list(job.node_list))
        path = product_path(job)
        head = cube.save(path, meta={"nodes": node_digest(job.node_list)})
    except BaseException:
        _give_back_pending(record, pending)
        raise
    record.status = Status.STATUS_READY
    record.message = retention_words(job, store, now, record) if start < store.retention.horizon("raw", now) else ""
    record.gpus, record.fields = len(cube.gpus), [int(f) for f in cube.fields]
    _record_coverage(record, head, until=end)
    _replace_product(record, str(path.relative_to(settings.DATA_DIR)))
    record.materialized = timezone.now()
    record.save(update_fields=PRODUCT_FIELDS)
    report(100, f"{record.samples:,} samples from {record.gpus} GPUs")
    return record


def retention_words(job, store, now, record: JobTelemetry) -> str:
    """What the store still holds of a job whose raw samples are past their retention, and what the page shows."""
    from .selectors import job_retention

    state = job_retention(job, store=store, now=now)
    return state["words"] if state else ""


def _record_coverage(record: JobTelemetry, head, *, until) -> None:
    """The cube's extent on the record; its last bucket's end is at most ``until`` (the end of the window read:
    a running job's bucket is still filling, and its end lies in the future)."""
    record.samples = head.samples
    first, last, reporting = head.coverage()
    record.first_sample, record.last_sample = as_utc(first), as_utc(last)
    if record.last_sample is not None and until is not None:
        record.last_sample = min(record.last_sample, until)
    record.gpus_reporting = reporting


def _replace_product(record: JobTelemetry, product: str) -> None:
    """Point the record at ``product``; a single-file cube of an older layout it pointed at goes."""
    previous = record.product
    record.product = product
    if previous and previous != product and previous.endswith(".npz"):
        (Path(settings.DATA_DIR) / previous).unlink(missing_ok=True)


# -- the incremental update (the refresher) ------------------------------------------------------------

def _why_rebuild(record: JobTelemetry | None, job, start, step: int) -> tuple[str, object]:
    """(why the whole cube must be built again, the saved head) — the reason is "" when appending will do."""
    if record is None or not record.has_product():
        return "there is no cube yet", None
    path = Path(settings.DATA_DIR) / record.product
    if not path.is_dir():
        return "the cube is in the older single-file layout", None
    try:
        head = read_head(path)
    except (OSError, KeyError, ValueError) as exc:
        return f"the saved cube cannot be read ({exc})", None
    if head.step != step:
        return f"the job ran long enough for {step} s buckets instead of {head.step} s", head
    if head.meta.get("nodes") != node_digest(job.node_list):
        return "the job's node list changed", head
    if record.window_start != start or record.window_end is None:
        return "the job's start time changed", head
    return "", head


def job_telemetry_update(job, report=_quiet) -> JobTelemetry:
    """Bring the job's cube up to date with what the store received since it was last read: the buckets
    from the last partial one (and from the earliest late sample) to now are read, appended and saved; the
    buckets before stay as saved. The whole cube is built again (:func:`job_telemetry_refresh`) when there
    is none, when the job's duration calls for another step (:func:`choose_step`), when its node list or
    start changed, or when the new samples name a GPU or field the cube lacks."""
    window = product_window(job)
    record = JobTelemetry.objects.filter(job=job).first()
    if window is None:
        return job_telemetry_refresh(job, report)
    start, end = window
    step = choose_step((end - start).total_seconds())
    reason, head = _why_rebuild(record, job, start, step)
    if reason:
        report(0, f"building the whole cube: {reason}")
        return job_telemetry_refresh(job, report)
    path = Path(settings.DATA_DIR) / record.product
    # The bucket the last read ended in (it was partial then); when the job's end came before that read
    # (Slurm's end time against our clock), the bucket of the end, so nothing after the end is kept.
    since = bucket_floor(min(record.window_end, end), step)
    pending = _take_pending(record)
    if pending is not None:
        since = min(since, bucket_floor(pending, step))
    read_from = max(start, since)
    try:
        if read_from < end:
            report(10, f"reading {len(job.node_list)} nodes from {read_from:%H:%M:%S} UTC at {step} s buckets")
            aggregated = telemetry_store().aggregate(
                Query(start=read_from, end=end, cluster=job.cluster.name, hosts=tuple(job.node_list)), step)
        else:
            aggregated = pd.DataFrame()
        tail = align_cube(aggregated, step, head.hosts, head.gpus, head.fields)
        if tail is None:
            _give_back_pending(record, pending)
            pending = None
            report(20, "building the whole cube: the new samples name a GPU or field the cube lacks")
            return job_telemetry_refresh(job, report)
        report(60, f"{len(aggregated):,} buckets read")
        saved = extend_saved_cube(path, tail, as_naive64(bucket_floor(read_from, step)))
    except BaseException:
        _give_back_pending(record, pending)
        raise
    record.window_end, record.step_seconds = end, step
    record.status, record.message = Status.STATUS_READY, ""
    record.gpus, record.fields = len(saved.hosts), [int(f) for f in saved.fields]
    _record_coverage(record, saved, until=end)
    record.materialized = timezone.now()
    record.save(update_fields=PRODUCT_FIELDS)
    report(100, f"{int(tail.count.sum()):,} samples from {read_from:%H:%M:%S} UTC appended; {record.samples:,} in all")
    return record


# -- ingestion: storing a batch -------------------------------------------------------------------------

def ingest_scope(job) -> Scope:
    """What a caller may write: anything without a job token; with one, its job's cluster, nodes and write window
    (``Job.write_window``: its run time, or its time since submission while it waits, ± JOB_WRITE_MARGIN_MINUTES)."""
    if job is None:
        return Scope()
    window = job.write_window()
    return Scope(cluster=job.cluster.name, hosts=frozenset(job.node_list or ()), window=window.as_tuple(),
                 window_words=window.words())


def ingest_samples(frame: pd.DataFrame, errors: list[dict], *, source: str, sender: str, nbytes: int, rows: int,
                   created_by=None, net: pd.DataFrame | None = None, facts=(), cluster: str = "") -> IngestBatch:
    """Store a batch of canonical samples (and ``net``, its network samples, with ``write_net``), record it
    (:class:`IngestBatch`: who sent it, what was kept and rejected, the first errors) and tell the jobs
    it reached (:func:`samples_arrived`). ``rows``: samples read, kept or not. ``facts``: the batch's version
    readings (``versions.Observation``), stored as facts (:func:`version_facts_record`), never as samples. The
    store's TelemetryUnavailable propagates before anything is recorded."""
    net_rows = 0 if net is None else len(net)
    facts = list(facts)
    if len(frame):
        telemetry_store().write(frame)
    if net_rows:
        telemetry_store().write_net(net)
    kept = [part for part in (frame, net) if part is not None and len(part)]
    batch_cluster = kept[0]["cluster"].iloc[0] if kept else cluster
    if facts:
        version_facts_record(facts, source=source, cluster=batch_cluster)
    hosts = set().union(*(set(part["host"]) for part in kept)) if kept else set()
    batch = IngestBatch.objects.create(
        sender=sender[:200], source=source, cluster=batch_cluster,
        hosts=len(hosts | {fact.host for fact in facts}),
        accepted=len(frame) + net_rows, rejected=rows - len(frame) - net_rows,
        bytes=nbytes, first_errors=list(errors[:10]), created_by=created_by)
    if len(frame):
        # The jobs this batch reached refresh their products within seconds (apps/core/live.py).
        samples_arrived(frame, source)
    return batch


# -- ingestion: the jobs a batch reached (found by selectors.jobs_touched) -----------------------------

def samples_arrived(frame: pd.DataFrame, source: str) -> list[int]:
    """After a batch of canonical samples was stored: record on each job it reached the first and last
    sample per ``source`` (IngestBatch.source, or "dcgm-live"), note the earliest as pending for the
    incremental update, and mark the jobs dirty so their products refresh within seconds. Returns the pks.
    Never raises: the samples are stored either way, and beat's refresh catches up."""
    try:
        touched = jobs_touched(frame)
        if not touched:
            return []
        _note_sources(touched, source)
    except Exception:  # noqa: BLE001 - a failure here must not fail the ingestion that already stored
        logger.exception("could not note the jobs a %s batch reached", source)
        return []
    from apps.core.live import mark_jobs_dirty

    return mark_jobs_dirty(touched, reason=f"{source} batch")


def _note_sources(touched: dict[int, tuple[datetime, datetime]], source: str) -> None:
    from apps.jobs.models import Job

    # The host map may be a few seconds old: a job deleted since (a demo reset) is left out.
    pks = list(Job.objects.filter(pk__in=list(touched)).values_list("pk", flat=True))
    for gone in set(touched) - set(pks):
        touched.pop(gone)
    have = set(JobTelemetry.objects.filter(job_id__in=pks).values_list("job_id", flat=True))
    if len(have) < len(pks):
        JobTelemetry.objects.bulk_create(
            [JobTelemetry(job_id=pk, status=Status.STATUS_RUNNING, message="samples arrived; building the product")
             for pk in pks if pk not in have], ignore_conflicts=True)
    by_first: dict[datetime, list[int]] = {}
    for pk, (first, _) in touched.items():
        by_first.setdefault(first, []).append(pk)
    for first, group in by_first.items():  # usually one: a batch's samples start together
        # Only rows it lowers are written (the nodes of one job post the same minute: one write, not a thousand).
        JobTelemetry.objects.filter(job_id__in=group).exclude(pending_from__lte=first).update(
            pending_from=Least(Coalesce(F("pending_from"), Value(first)), Value(first)))
    # {source: {first, last}}: read, merged and written back per job only when it moves by a second or more
    # (a thousand nodes of one job posting the same minute write it once, not a thousand times). Two sources
    # writing the same job at the same instant may lose one update until that source's next batch.
    for pk, sources in JobTelemetry.objects.filter(job_id__in=pks).values_list("job_id", "sources"):
        first, last = touched[pk]
        sources = dict(sources or {})
        known = sources.get(source) or {}
        old_first, old_last = _parse(known.get("first")), _parse(known.get("last"))
        new_first = first if old_first is None else min(first, old_first)
        new_last = last if old_last is None else max(last, old_last)
        if old_last is not None and old_first is not None and new_first == old_first \
                and (new_last - old_last).total_seconds() < 1:
            continue
        sources[source] = {"first": new_first.isoformat(), "last": new_last.isoformat()}
        JobTelemetry.objects.filter(job_id=pk).update(sources=sources)


def _parse(text):
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


# -- versions: facts with first and last seen (apps/telemetry/versions.py) ------------------------------

def version_facts_record(observations, *, source: str, cluster: str = "") -> dict:
    """Store version readings as facts: per (host, gpu, key, value) one row whose ``first_seen``/``last_seen`` widen
    to cover every reading; a reading of a new value is a new row. Idempotent (reading the same again changes
    nothing). Returns {"created": n, "extended": n}."""
    from django.db import transaction

    from .models import VersionFact

    spans: dict[tuple, list] = {}
    for seen in observations:
        stamp = pd.Timestamp(seen.seen)
        moment = (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")).to_pydatetime()
        span = spans.setdefault((seen.host, seen.gpu, seen.key, seen.value), [moment, moment, seen.partition])
        span[0], span[1] = min(span[0], moment), max(span[1], moment)
        if seen.partition:
            span[2] = seen.partition
    if not spans:
        return {"created": 0, "extended": 0}
    hosts = {key[0] for key in spans}
    created = extended = 0
    with transaction.atomic():
        existing = {(f.host, f.gpu, f.key, f.value): f
                    for f in VersionFact.objects.select_for_update().filter(host__in=hosts, key__in={k[2] for k in spans})}
        known = dict(VersionFact.objects.filter(host__in=hosts).exclude(partition="")
                      .order_by("last_seen").values_list("host", "partition"))  # the latest told wins
        new, changed = [], []
        for key, (first, last, partition) in spans.items():
            fact = existing.get(key)
            partition = partition or known.get(key[0], "")
            if fact is None:
                new.append(VersionFact(cluster=cluster, host=key[0], gpu=key[1], key=key[2], value=key[3], first_seen=first,
                                       last_seen=last, partition=partition, source=source))
                continue
            if first < fact.first_seen or last > fact.last_seen or (partition and partition != fact.partition):
                fact.first_seen, fact.last_seen = min(first, fact.first_seen), max(last, fact.last_seen)
                fact.partition = partition or fact.partition
                fact.source = source if last >= fact.last_seen else fact.source
                changed.append(fact)
        VersionFact.objects.bulk_create(new, ignore_conflicts=True)
        if changed:
            VersionFact.objects.bulk_update(changed, ["first_seen", "last_seen", "partition", "source"])
        created, extended = len(new), len(changed)
        if any(partition for _f, _l, partition in spans.values()):
            # The partition a host was last told in is the host's: its other facts follow it.
            for host in hosts:
                told = [span[2] for key, span in spans.items() if key[0] == host and span[2]]
                if told:
                    VersionFact.objects.filter(host=host).exclude(partition=told[-1]).update(partition=told[-1])
    return {"created": created, "extended": extended}


# -- retention (issue 40) ----------------------------------------------------------------------------------------

def expire_telemetry(*, dry_run: bool = False, report=_quiet, now: datetime | None = None) -> list:
    """The retention pass over the configured store (``retention.py``): every day partition or daily index lying
    wholly before its tier's horizon goes (``dry_run``: only listed), one at a time, with ``report(done, message,
    total)`` after each. Idempotent; returns the store's ``Expiry`` items."""
    store = telemetry_store()
    planned = store.expire(now=now, dry_run=True)
    if dry_run or not planned:
        report(len(planned), f"{len(planned)} partition(s) {'would go' if dry_run else 'to remove: none'} "
                             f"({store.retention.describe()})", len(planned))
        return planned

    def progress(done, total, item):
        report(done, f"removed {item.partition} ({item.source} {item.tier}, {item.first:%Y-%m-%d})", total)

    report(0, f"removing {len(planned)} partition(s) past their tier's retention ({store.retention.describe()})",
           len(planned))
    gone = store.expire(now=now, progress=progress)
    logger.info("telemetry retention: removed %d partition(s) (%s)", len(gone), store.retention.describe())
    return gone
