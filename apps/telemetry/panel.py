"""The telemetry panel of the job page and its part of the first screen: what data there is, really.

The panel's shell is cheap (one row); the heatmap and the node table load as JSON from the API
after the first paint. The summary says the truth about the data: its real first and last sample,
how many GPUs reported, and whether a running job's samples still arrive — for the cube the page
shows and, per ingestion source (collector posts, imports, live DCGM reads), when that source last
sent a sample for the job's nodes (``JobTelemetry.sources``, written by ingestion).
"""
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from apps.core.coverage import LAGGING, NONE, STALE, coverage
from apps.core.numbers import clock, duration_words
from apps.core.panels import Finding, Freshness, PanelSummary

from .choices import JobTelemetryStatusChoices as Status
from .fields import FIELDS, lookup
from .models import JobTelemetry

DEFAULT_HEATMAP_FIELD = 1002  # SM activity: busy SMs, the first thing to look at
SOURCE = "GPU telemetry"
# The fields offered first in the picker, in this order; the rest follow by id.
PREFERRED = (1002, 1004, 1005, 150, 100, 155, 1001, 1011, 1012)
NODE_TABLE_FIELDS = 6  # the node x field table shows the first fields offered (the API gives any)
# Ingestion sources (IngestBatch.source, and the live DCGM reads) in words.
SOURCE_LABELS = {"samples": "collector posts", "dcgmi-dmon": "imports of dcgmi dmon output",
                 "dcgm-exporter": "imports of dcgm-exporter text", "dcgm-live": "live DCGM reads", "demo": "the demo feeder"}
# A source's samples are recorded as they arrive (no refresh in between): a collector posting every
# minute stays live; silent for 3 minutes it lags, for 15 it is stale.
SOURCE_LIVE_SECONDS = 180.0
SOURCE_STALE_SECONDS = 900.0


@dataclass(frozen=True)
class SourceFreshness:
    source: str  # the IngestBatch.source value
    label: str  # in words
    first: datetime | None
    last: datetime | None
    state: str  # apps.core.coverage's words: live, lagging, stale, complete, ends early
    words: str
    age: str  # "20 s" since the last sample, while the job runs; "" otherwise


def record_for(job) -> JobTelemetry | None:
    return JobTelemetry.objects.filter(job=job).first()


def job_coverage(job, record: JobTelemetry | None, now=None):
    now = now or timezone.now()
    has_data = record is not None and record.status == Status.STATUS_READY
    refresh = float(getattr(settings, "TELEMETRY_REFRESH_SECONDS", 300))
    step = float(record.step_seconds or 10) if record else 10.0
    return coverage(source=SOURCE, running=job.is_active and job.end_time is None, start=job.start_time, end=job.end_time,
                    first=record.first_sample if has_data else None, last=record.last_sample if has_data else None,
                    now=now, step_s=step, live_s=refresh + 2 * step + 60, stale_s=refresh + 2 * step + 600,
                    reporting=record.gpus_reporting if has_data else None, expected=job.gpus or None)


def _moment(text):
    try:
        return datetime.fromisoformat(text) if text else None
    except (TypeError, ValueError):
        return None


def source_freshness(job, record: JobTelemetry | None, now=None) -> list[SourceFreshness]:
    """Each ingestion source that sent samples for the job, freshest first, with its state: live, lagging or
    stale while the job runs (by the age of its last sample), complete or ends early after."""
    if record is None or not record.sources or job.start_time is None:
        return []
    now = now or timezone.now()
    running = job.is_active and job.end_time is None
    found = []
    for source, span in (record.sources or {}).items():
        span = span if isinstance(span, dict) else {"last": span}
        first, last = _moment(span.get("first")), _moment(span.get("last"))
        if last is None:
            continue
        label = SOURCE_LABELS.get(source, source)
        state = coverage(source=f"{SOURCE} from {label}", running=running, start=job.start_time, end=job.end_time,
                         first=first or last, last=last, now=now, step_s=float(record.step_seconds or 10),
                         live_s=SOURCE_LIVE_SECONDS, stale_s=SOURCE_STALE_SECONDS)
        found.append(SourceFreshness(source, label, first, last, state.state, state.words,
                                     duration_words(now - last) if running else ""))
    return sorted(found, key=lambda item: item.last, reverse=True)


def sources_words(job, record: JobTelemetry | None, sources: list[SourceFreshness]) -> str:
    """What to say when no source is listed (so the absence is not read as silence that was measured)."""
    if sources or job.start_time is None:
        return ""
    if record is not None and record.status == Status.STATUS_READY:
        return ("No per-source times for this job: its samples reached the telemetry store without passing the "
                "portal's ingestion (loaded directly, or before the portal recorded sources).")
    return "No source (collector, import or live DCGM read) has sent samples for this job's nodes and run time."


def version(job) -> str | None:
    """Changes whenever the job's telemetry product is rebuilt or its state changes."""
    row = JobTelemetry.objects.filter(job=job).values("pk", "status", "materialized", "product", "message").first()
    return None if row is None else f"t{row['pk']}-{row['status']}-{row['materialized']}-{row['product']}-{row['message']}"


def fields_offered(record: JobTelemetry) -> list[dict]:
    ids = [int(f) for f in record.fields or []]
    ordered = [f for f in PREFERRED if f in ids] + sorted(f for f in ids if f not in PREFERRED)
    return [{"id": fid, "name": FIELDS[fid].display_name if fid in FIELDS else str(fid),
             "unit": FIELDS[fid].unit if fid in FIELDS else "", "meaning": FIELDS[fid].meaning if fid in FIELDS else ""}
            for fid in ordered]


def context(job, request) -> dict:
    record = record_for(job)
    sources = source_freshness(job, record)
    result = {"job_telemetry": record, "telemetry_coverage": job_coverage(job, record), "telemetry_sources": sources,
              "telemetry_sources_words": sources_words(job, record, sources), "telemetry_retention": _retention(job)}
    if record is None or record.status != Status.STATUS_READY:
        return result
    offered = fields_offered(record)
    try:  # an id, a current or legacy DCGM name, or a dmon tag, as everywhere else
        wanted = lookup(request.GET["tfield"]).id if request.GET.get("tfield") else None
    except KeyError:
        wanted = None
    chosen = next((f for f in offered if f["id"] == wanted), None) or next(
        (f for f in offered if f["id"] == DEFAULT_HEATMAP_FIELD), offered[0] if offered else None)
    args = [job.cluster.name, job.job_id]
    result.update(telemetry_fields=offered, telemetry_field=chosen,
                  telemetry_heatmap_url=reverse("telemetry-api:job-heatmap", args=args),
                  telemetry_nodes_url=reverse("telemetry-api:job-nodes", args=args) + "?fields="
                  + ",".join(str(f["id"]) for f in offered[:NODE_TABLE_FIELDS]))
    return result


def _retention(job) -> dict | None:
    """The job's telemetry past its raw retention (``selectors.job_retention``); None when all is kept or the store
    cannot be asked (the store's own panel state says why)."""
    from .backends.base import TelemetryUnavailable
    from .selectors import job_retention

    try:
        return job_retention(job)
    except TelemetryUnavailable:
        return None


def summary(job) -> PanelSummary | None:
    if job.start_time is None:
        return None
    record = record_for(job)
    found = job_coverage(job, record)
    part = PanelSummary(freshness=[Freshness(SOURCE, record.first_sample if record else None,
                                             record.last_sample if record else None, found.state, found.words,
                                             record.gpus_reporting if record else None, job.gpus or None)])
    for source in source_freshness(job, record):
        part.freshness.append(Freshness(f"{SOURCE} from {source.label}", source.first, source.last, source.state,
                                        source.words))
    kept = _retention(job)
    if kept is not None:
        part.data["retention"] = {key: kept[key] for key in ("raw_expired_on", "whole", "tier", "showing", "retention")}
        part.findings.append(Finding("info" if kept["showing"] != "nothing" else "warning", kept["words"],
                                     "Ask staff for a longer raw retention (TELEMETRY_RETENTION_RAW_DAYS) if jobs must "
                                     "be looked at sample by sample for longer.", "#panel-telemetry", "telemetry"))
    if record is not None and record.status == Status.STATUS_FAILED:
        part.findings.append(Finding("warning", f"Reading this job's telemetry failed: {record.message}",
                                     "Staff: check the telemetry store on the Staff page.", "#panel-telemetry", "telemetry"))
    elif found.state in (STALE, LAGGING):
        since = f"since {clock(record.last_sample, job.start_time)}" if record and record.last_sample else ""
        part.findings.append(Finding("warning" if found.state == STALE else "info",
                                     f"No new GPU samples {since} while the job runs: this page shows the job as it was then.",
                                     "Check the collector on the job's nodes (deploy/collector/), or whether the job hangs.",
                                     "#panel-telemetry", "telemetry"))
    elif found.state == NONE and job.is_active:
        part.findings.append(Finding("warning", found.words, "Start the collector in the job, or ask staff whether the "
                                     "site's DCGM exporter covers these nodes.", "#panel-telemetry", "telemetry"))
    if record is not None and record.gpus_reporting is not None and job.gpus and record.gpus_reporting < job.gpus \
            and found.state not in (NONE,):
        missing = job.gpus - record.gpus_reporting
        part.findings.append(Finding("warning", f"{missing:,} of the job's {job.gpus:,} GPUs sent no telemetry.",
                                     "Their rows stay empty; check the collector on their nodes.", "#panel-telemetry",
                                     "telemetry"))
    return part


# -- Versions and thermal outliers: the "Node consistency" panel (registered in apps.py) ---------------------------

def versions_context(job, request) -> dict:
    """The job's nodes' versions (one row per key, the values with their node counts), the minorities and the
    thermal outliers at its start."""
    from . import versions as vocabulary
    from .selectors import job_thermal_outliers, job_versions

    found = job_versions(job)
    rows = []
    for key in vocabulary.KEYS:
        counts = found["keys"].get(key)
        if counts:
            rows.append({"key": key, "label": vocabulary.KEYS[key].label, "family": vocabulary.KEYS[key].family,
                         "values": sorted(counts.items(), key=lambda item: (-item[1], item[0])), "mixed": len(counts) > 1})
    merged = [{"sentence": first["sentence"] + ("; the same nodes also differ in " + ", ".join(
        f"{m['label']} ({m['value']} against {m['majority_value']})" for m in also) if also else "")}
        for first, also in merged_minorities(found["minorities"])]
    return {"versions": found, "version_rows": rows, "version_findings": merged,
            "thermal_outliers": job_thermal_outliers(job)}


def merged_minorities(minorities: list[dict]) -> list[tuple[dict, list[dict]]]:
    """One entry per set of minority nodes: the first key's minority and the other keys the same nodes differ in
    (a node on an older driver also has an older CUDA driver: one finding, not two)."""
    groups: dict[tuple, list[dict]] = {}
    for minority in minorities:
        groups.setdefault(tuple(minority["hosts"]), []).append(minority)
    return [(items[0], items[1:]) for items in groups.values()]


def versions_summary(job) -> PanelSummary | None:
    """A first-screen finding per version minority ("4 of 512 nodes run driver 550.54 while 508 run 560.35:
    nid[001200-001203]") and per thermal outlier; the versions as data for the first-screen API."""
    from .selectors import job_thermal_outliers, job_versions

    if not job.node_list:
        return None
    found = job_versions(job)
    part = PanelSummary(data={"versions": {key: found[key] for key in ("nodes", "known", "keys", "minorities")}})
    for minority, also in merged_minorities(found["minorities"]):
        title = minority["sentence"]
        if also:
            title += "; the same nodes also differ in " + ", ".join(
                f"{m['label']} ({m['value']} against {m['majority_value']})" for m in also)
        part.findings.append(Finding(
            "warning", title,
            f"Resubmit excluding them (--exclude={minority['hostlist']}) or ask staff to align the "
            f"{minority['label']}; mixed versions make collectives unstable or slow.", "#panel-versions", "versions"))
    thermal = job_thermal_outliers(job)
    part.data["versions"]["thermal_outliers"] = thermal
    for outlier in thermal:
        part.findings.append(Finding("warning", outlier["sentence"],
                                     f"Ask staff to check its cooling; resubmit excluding it (--exclude={outlier['host']}).",
                                     "#panel-versions", "versions"))
    return part


def versions_version(job) -> str | None:
    """Changes whenever a fact of the job's nodes moves."""
    from django.db.models import Count, Max

    from .models import VersionFact

    row = VersionFact.objects.filter(host__in=list(job.node_list or ())).aggregate(n=Count("pk"), last=Max("last_seen"))
    return f"v{row['n']}-{row['last']}"
