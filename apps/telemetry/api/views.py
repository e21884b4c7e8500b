"""Telemetry API: post samples, import dcgmi dmon / dcgm-exporter text, read series back."""
import math
from contextlib import contextmanager

from django.conf import settings
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JobTokenAuthentication
from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.negotiation import FormatIsOurs
from apps.core.api.params import CommaListField, JobRefField, QueryIntegerField, parse_query
from apps.core.timebounds import capped_step, step_note
from apps.jobs.authentication import token_job
from apps.jobs.selectors import job_get_for_user

from .. import ingest
from ..backends.base import STATS, Query, TelemetryUnavailable, TierError
from ..fields import field_ids
from ..selectors import job_series_scope, read_series
from ..services import ingest_samples, ingest_scope
from .openapi import IngestResponse, SeriesResponse

TELEMETRY_AUTHENTICATION = [TokenAuthentication, JobTokenAuthentication, SessionAuthentication]


class RawBodyParser(BaseParser):
    """Hand the view the undecoded body (it decides between JSON, NDJSON and gzip itself), never
    reading more than TELEMETRY_MAX_BODY_BYTES of it."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        if stream is None:
            return b""
        limit = settings.TELEMETRY_MAX_BODY_BYTES
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"the body has more than {limit:,} bytes; send smaller batches", status_code=413)
        return data


class CanPostTelemetry(permissions.BasePermission):
    message = ("Posting telemetry needs a job token (for that job's nodes) or a service token with the "
               "telemetry.add_ingestbatch permission.")

    def has_permission(self, request, view):
        if token_job(request) is not None:
            return True
        user = request.user
        return bool(user and user.is_authenticated and (user.is_staff or user.has_perm("telemetry.add_ingestbatch")))


def _raw_body(request) -> bytes:
    limit = settings.TELEMETRY_MAX_BODY_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isascii() and declared.isdecimal() and int(declared) > limit:
        raise InputError(f"the body has {int(declared):,} bytes; at most {limit:,} are accepted per request (send smaller batches)",
                         status_code=413)
    return request.data if isinstance(request.data, bytes) else b""


def _body_pieces(request, body: bytes, *, limit: int):
    """The body's bytes in pieces, gunzipped while read (size and ratio checked as it inflates)."""
    return ingest.inflate(body, request.META.get("HTTP_CONTENT_ENCODING"), limit=limit,
                          max_ratio=settings.TELEMETRY_MAX_COMPRESSION_RATIO)


@contextmanager
def _batch_errors():
    """Errors found while the body is read: 413 when it is too large, 400 when it cannot be read."""
    try:
        yield
    except ingest.BatchTooLarge as exc:
        raise InputError(str(exc), status_code=413) from exc
    except ingest.BatchError as exc:
        raise InputError(str(exc)) from exc


def _sender(request) -> str:
    job = token_job(request)
    return f"job {job.cluster.name}/{job.job_id}" if job is not None else request.user.get_username()


def _store_and_record(request, frame, errors, *, source, nbytes, rows, net=None, facts=(), cluster=""):
    """Hand the batch to :func:`ingest_samples` and answer with what was kept; a batch with no good sample is a 400.
    ``net``: the batch's network samples (NIC rows), stored beside the GPU samples."""
    job = token_job(request)
    try:
        batch = ingest_samples(frame, errors, source=source, sender=_sender(request), nbytes=nbytes, rows=rows,
                               created_by=request.user if getattr(request.user, "is_authenticated", False) and job is None else None,
                               net=net, facts=facts, cluster=cluster)
    except TelemetryUnavailable as exc:
        raise InputError(str(exc), status_code=503) from exc
    kept = len(frame) + (0 if net is None else len(net))
    body = {"accepted": kept, "versions": len(facts), "rejected": rows - kept, "batch": batch.pk,
            "errors": errors[:ingest.MAX_REPORTED_ERRORS], "errors_truncated": len(errors) > ingest.MAX_REPORTED_ERRORS}
    if rows and not kept and not facts:
        detail = f"none of the {rows} samples was accepted; first problem: {errors[0]['message']}" if errors else "no samples"
        raise InputError(detail, [ErrorItem(message=e["message"], field=e.get("field"), line=e.get("line")) for e in errors[:20]])
    return Response(body, status=status.HTTP_200_OK)


IMPORT_FORMATS = ("dcgmi-dmon", "dcgm-exporter", "lustre-jobstats", "fabric-manager")


def _other_importers() -> dict:
    """Formats whose rows are not GPU samples: each module answers the request itself (``import_text``)."""
    from . import fabric, lustre

    return {"lustre-jobstats": lustre.import_text, "fabric-manager": fabric.import_text}


class ImportParams(serializers.Serializer):
    format = serializers.ChoiceField(choices=IMPORT_FORMATS)
    host = serializers.CharField(max_length=253, required=False, allow_blank=True)
    cluster = serializers.CharField(max_length=64, required=False, allow_blank=True)
    start = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                  help_text="ISO 8601 time of dmon's first tick")
    interval = serializers.FloatField(min_value=0.001, max_value=86_400, required=False,
                                      help_text="seconds between dmon ticks (dmon -d in ms / 1000)")
    ts = serializers.CharField(max_length=64, required=False, allow_blank=True, help_text="scrape time of exporter text")

    def validate_interval(self, value):
        if not math.isfinite(value):
            raise serializers.ValidationError("A finite number of seconds is required.")
        return value


class SampleIngestParams(serializers.Serializer):
    cluster = serializers.CharField(max_length=64, required=False, help_text="cluster of samples that name none")


def _timestamp(value: str):
    try:
        return ingest.parse_timestamp(value)
    except ValueError as exc:
        raise serializers.ValidationError(str(exc)) from None


class SeriesParams(serializers.Serializer):
    job = JobRefField(required=False, help_text="cluster/job_id: the job's nodes and run time")
    cluster = serializers.CharField(max_length=64, required=False)
    host = serializers.ListField(child=serializers.CharField(max_length=253), required=False, max_length=10_000)
    gpu = serializers.ListField(child=QueryIntegerField(min_value=0, max_value=ingest.MAX_GPU_INDEX), required=False,
                                max_length=ingest.MAX_GPU_INDEX + 1)
    field = CommaListField(child=serializers.CharField(max_length=100), required=False, help_text="DCGM ids or names")
    start = serializers.CharField(max_length=64, required=False, allow_blank=True)
    end = serializers.CharField(max_length=64, required=False, allow_blank=True)
    step = QueryIntegerField(min_value=1, max_value=366 * 86_400, required=False,
                             help_text="bucket width in seconds: count/mean/min/max per bucket instead of raw samples")
    stats = CommaListField(child=serializers.ChoiceField(choices=STATS), required=False, max_length=len(STATS),
                           help_text=f"comma list of {','.join(STATS)}")

    def validate_field(self, names):
        try:
            return field_ids(names)
        except ValueError as exc:
            raise serializers.ValidationError(exc.args[0]) from None

    def validate_start(self, value):
        return _timestamp(value) if value.strip() else None

    def validate_end(self, value):
        return _timestamp(value) if value.strip() else None


def _in_window(scope, params: dict, name: str) -> None:
    """A 400 naming ``name`` and the job's write window when the time it gives is outside (a job token's scope); each
    sample's own time is checked after parsing too (``Scope.restrict``: dropped and counted)."""
    text = (params.get(name) or "").strip()
    if scope.window is None or not text:
        return
    try:
        moment = ingest.parse_timestamp(float(text) if text.replace(".", "", 1).isdigit() else text)
    except (ValueError, OverflowError, OSError):
        return  # the importer names what is wrong with it
    if (outside := scope.time_error(moment)) is not None:
        raise InputError(f"{name}: {outside}", [ErrorItem(message=outside, field=name)])


class SampleIngestView(APIView):
    """Post samples: a JSON array, ``{"samples": [...]}`` or NDJSON, optionally gzip-compressed, of
    ``{"ts", "host", "gpu", "field", "value"}`` (+ ``cluster``, ``uuid``). ``field`` is a DCGM id or
    name. A row with ``nic`` (``hsn0``..) instead of ``gpu`` is a network sample whose ``field`` is a
    network field or its driver name (GET telemetry/fields/), counters cumulative as reported; both
    kinds may be mixed. Good rows are stored (re-sending is harmless), bad rows are reported by row
    and line."""

    authentication_classes = TELEMETRY_AUTHENTICATION
    permission_classes = [CanPostTelemetry]
    parser_classes = [RawBodyParser]

    @extend_schema(request={"application/json": {"type": "array", "items": {"type": "object"}},
                            "application/x-ndjson": {"type": "string"}},
                   parameters=[SampleIngestParams],
                   responses={200: IngestResponse})
    def post(self, request):
        body = _raw_body(request)
        params = parse_query(request, SampleIngestParams)
        with _batch_errors():
            samples = ingest.iter_samples(_body_pieces(request, body, limit=settings.TELEMETRY_MAX_UNPACKED_BYTES),
                                          request.content_type, max_samples=settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST)
            parsed = ingest.parse_batch(samples, now=timezone.now(), default_cluster=params.get("cluster", ""),
                                        scope=ingest_scope(token_job(request)))
        return _store_and_record(request, parsed.frame, [e.as_dict() for e in parsed.errors], source="samples",
                                 nbytes=len(body), rows=parsed.rows - len(parsed.facts), net=parsed.net, facts=parsed.facts,
                                 cluster=ingest_scope(token_job(request)).cluster_for(params.get("cluster", "")))


class SeriesView(APIView):
    """Samples or bucketed statistics for one job (``job=cluster/id``, any job you may see) or, for
    staff, any hosts. ``step`` (seconds) gives count/mean/min/max per bucket instead of raw samples."""

    authentication_classes = TELEMETRY_AUTHENTICATION

    @extend_schema(parameters=[SeriesParams], responses={200: SeriesResponse})
    def get(self, request):
        params = parse_query(request, SeriesParams)
        start, end, step = params.get("start"), params.get("end"), params.get("step")
        hosts, cluster = params.get("host") or None, params.get("cluster")
        if "job" in params:
            job = job_get_for_user(request.user, params["job"].cluster, params["job"].job_id, token_job(request))
            if job is None:
                raise Http404
            cluster = job.cluster.name
            hosts, start, end = job_series_scope(job, hosts=hosts, start=start, end=end)
        elif not (request.user.is_authenticated and request.user.is_staff and token_job(request) is None):
            raise InputError("give job=<cluster>/<job_id> (a job you may see); only staff may read hosts directly",
                             [ErrorItem(message="required", field="job")], status_code=400)
        if not start or not end or end <= start:
            raise InputError("start and end (ISO 8601) are needed, with end after start",
                             [ErrorItem(message="required", field="start")])
        query = Query(start=start, end=end, cluster=cluster, hosts=None if hosts is None else tuple(hosts),
                      gpus=tuple(params.get("gpu") or ()) or None, fields=tuple(params.get("field") or ()) or None)
        note = ""
        if step:  # at most timebounds.MAX_BUCKETS buckets from start to end, whatever step was asked for
            asked, step = step, int(capped_step((end - start).total_seconds(), step))
            note = step_note(asked, step)
        try:
            frame = read_series(query, step, params.get("stats"))
        except TelemetryUnavailable as exc:
            raise InputError(str(exc), status_code=503) from exc
        except TierError as exc:  # a step finer than (or percentiles older than) the tier that still holds the window
            wants = "stats" if "percentiles" in str(exc) else "step"
            raise InputError(str(exc), [ErrorItem(field=wants, message=str(exc))]) from exc
        return Response(_series_body(frame, start=start, end=end, step=step, note=note))


def _series_body(frame, *, start, end, step, note: str = "") -> dict:
    """The answer: at most TELEMETRY_MAX_SERIES_ROWS rows, times as ISO text."""
    limit = settings.TELEMETRY_MAX_SERIES_ROWS
    truncated = len(frame) > limit
    frame = frame.head(limit)
    time_column = "bucket" if step else "ts"
    frame = frame.assign(**{time_column: frame[time_column].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
    return {"start": start.isoformat(), "end": end.isoformat(), "step": step, "step_note": note,
            "columns": list(frame.columns), "rows": frame.to_numpy().tolist(), "truncated": truncated}


class ImportView(APIView):
    """Import text that DCGM tools print: ``format=dcgmi-dmon`` (needs ``host`` and ``start``, and
    ``interval`` in seconds, default 1) or ``format=dcgm-exporter`` (Prometheus text; ``host`` and
    ``ts`` fill in what the text lacks). Bad lines are reported by number; good ones are stored."""

    authentication_classes = TELEMETRY_AUTHENTICATION
    permission_classes = [CanPostTelemetry]
    parser_classes = [RawBodyParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FormatIsOurs
    FORMATS = IMPORT_FORMATS

    @extend_schema(request={"text/plain": {"type": "string"}}, parameters=[ImportParams], responses={200: IngestResponse})
    def post(self, request):
        from .. import importers

        params = parse_query(request, ImportParams)
        kind = params["format"]
        body = _raw_body(request)
        limit = settings.TELEMETRY_MAX_IMPORT_BYTES
        with _batch_errors():  # the importers read the text whole: it is unpacked (bounded) first
            data = b"".join(_body_pieces(request, body, limit=limit))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"the body is not UTF-8 text (byte {exc.start})") from exc
        del data
        scope = ingest_scope(token_job(request))
        cluster = scope.cluster_for(params.get("cluster", ""))
        if not cluster:
            raise InputError("give cluster=<name> for imported text", [ErrorItem(message="required", field="cluster")])
        other = _other_importers().get(kind)
        if other is not None:
            return other(request, text, params=params, cluster=cluster, scope=scope, nbytes=len(body))
        _in_window(scope, params, "start" if kind == "dcgmi-dmon" else "ts")
        try:
            if kind == "dcgmi-dmon":
                result = importers.parse_dcgmi_dmon(text, host=params.get("host", ""), cluster=cluster,
                                                    start=params.get("start"), interval_s=params.get("interval", 1.0))
            else:
                result = importers.parse_dcgm_exporter(text, host=params.get("host") or None, cluster=cluster,
                                                       ts=params.get("ts") or None)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        if result.samples > settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST:
            raise InputError(f"{result.samples:,} samples in one request; at most "
                             f"{settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST:,} (send smaller batches)", status_code=413)
        errors = [dict(error) for error in result.errors]
        frame, dropped = scope.restrict(result.frame)  # the same rules parse_batch applies per sample
        if dropped:
            errors.append({"line": None, "column": None, "message": dropped})
        facts = [fact for fact in result.facts if scope.host_error(fact.host) is None and scope.time_error(fact.seen) is None]
        return _store_and_record(request, frame, errors, source=kind, nbytes=len(body),
                                 rows=result.samples + len(result.errors), facts=facts, cluster=cluster)
