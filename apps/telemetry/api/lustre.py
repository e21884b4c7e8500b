"""Import of Lustre job statistics through ``POST /api/v1/telemetry/import/?format=lustre-jobstats&ts=<epoch>``.

The body is what ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats`` prints on the servers (parsed line by line
by :mod:`apps.telemetry.lustre`); ``ts`` is the time of the reading (epoch seconds or ISO 8601), required: the
counters are cumulative and only their time makes them rates. The counters become job series
(``lustre/<target>/<stat>``) in the telemetry store. A job token writes its own job only: the other jobs' entries
of the same text are dropped and counted, and ``ts`` must fall in its job's write window (``Job.write_window``: its
run time ± JOB_WRITE_MARGIN_MINUTES), else the import is a 400 naming ``ts`` and the window.
"""
from django.conf import settings
from rest_framework import status
from rest_framework.response import Response

from apps.core.api.exceptions import ErrorItem, InputError
from apps.jobs.authentication import token_job
from apps.jobs.models import Cluster

from .. import ingest
from ..backends.base import TelemetryUnavailable
from ..lustre import error_words, parse_text
from ..store import telemetry_store


def _reading_time(params: dict):
    text = (params.get("ts") or "").strip()
    if not text:
        raise InputError("ts is required: the time of the reading (epoch seconds or ISO 8601), e.g. ts=$(date +%s)",
                         [ErrorItem(message="required", field="ts")])
    try:
        value = float(text) if text.replace(".", "", 1).isdigit() else text
        return ingest.parse_timestamp(value)
    except ValueError as exc:
        raise InputError(f"ts: {exc}", [ErrorItem(message=str(exc), field="ts")]) from exc


def _items(errors: list[dict]) -> list[ErrorItem]:
    return [ErrorItem(message=error["message"], line=error.get("line"), field=error.get("column")) for error in errors[:20]]


def import_text(request, text: str, *, params: dict, cluster: str, scope, nbytes: int):
    ts = _reading_time(params)
    if (outside := scope.time_error(ts)) is not None:  # a job token: its job's write window (Job.write_window)
        raise InputError(f"ts: {outside}", [ErrorItem(message=outside, field="ts")])
    try:
        result = parse_text(text, cluster=cluster, ts=ts, max_bytes=settings.TELEMETRY_MAX_IMPORT_BYTES,
                            clusters=set(Cluster.objects.values_list("name", flat=True)))
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    errors = list(result.errors)
    error_count = result.error_count
    frame = result.frame
    job = token_job(request)
    dropped = 0
    if job is not None:  # a job token: its own job's series only
        mine = (frame["cluster"] == job.cluster.name) & (frame["job_id"] == int(job.job_id))
        dropped = int(len(frame) - mine.sum())
        frame = frame[mine]
        if dropped:
            others = len(result.jobs) - (1 if mine.any() else 0)
            errors.append({"line": None, "column": None,
                           "message": f"{dropped} counters of {others} other job(s) dropped: a job token writes its own job "
                                      f"({job.cluster.name}/{job.job_id}) only"})
            error_count += 1
    notes = []
    if result.not_jobs:
        notes.append(result.not_jobs_words())
    if frame.empty:
        if errors:
            detail = f"no job counter was accepted; first problem: {error_words(errors[0])}"
        elif result.not_jobs:
            detail = f"no job counter was accepted: {notes[0]}"
        else:
            detail = ("no job_stats entry in the body: send what 'lctl get_param obdfilter.*.job_stats mdt.*.job_stats' "
                      "prints on the servers")
        raise InputError(detail, _items(errors))
    try:
        written = telemetry_store().write_job_series(frame.reset_index(drop=True))
    except TelemetryUnavailable as exc:
        raise InputError(str(exc), status_code=503) from exc
    except ValueError as exc:  # the store's own validation: the parser should never let this through
        raise InputError(f"the store refused the counters: {exc}") from exc
    shown = errors[:ingest.MAX_REPORTED_ERRORS]
    jobs = sorted({f"{c}/{j}" for c, j in zip(frame["cluster"], frame["job_id"])})
    body = {"accepted": int(written), "rejected": result.error_count + dropped, "entries": result.entries,
            "targets": sorted(set(result.targets)), "jobs": jobs, "not_jobs": sum(result.not_jobs.values()),
            "notes": notes, "errors": shown, "errors_truncated": error_count > len(shown)}
    return Response(body, status=status.HTTP_200_OK)
