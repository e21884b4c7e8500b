"""Telemetry API: post samples, import dcgmi dmon / dcgm-exporter text, read series back."""
from datetime import timedelta

from django.conf import settings
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.jobs.authentication import JobTokenAuthentication, token_job
from apps.jobs.selectors import job_get_for_user

from .. import ingest
from ..backends.base import Query, TelemetryUnavailable
from ..fields import UnknownField, lookup
from ..models import IngestBatch
from ..store import telemetry_store

TELEMETRY_AUTHENTICATION = [TokenAuthentication, JobTokenAuthentication, SessionAuthentication]
# A job token may post for its job from a little before it started until a little after it ended.
JOB_WINDOW_SLACK = timedelta(minutes=10)


class RawBodyParser(BaseParser):
    """Hand the view the undecoded body: it decides between JSON, NDJSON and gzip itself."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class CanPostTelemetry(permissions.BasePermission):
    message = ("Posting telemetry needs a job token (for that job's nodes) or a service token with the "
               "telemetry.add_ingestbatch permission.")

    def has_permission(self, request, view):
        if token_job(request) is not None:
            return True
        user = request.user
        return bool(user and user.is_authenticated and (user.is_staff or user.has_perm("telemetry.add_ingestbatch")))


def _read_body(request) -> bytes:
    limit = settings.TELEMETRY_MAX_BODY_BYTES
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > limit:
        raise InputError(f"the body has {length:,} bytes; at most {limit:,} are accepted per request (send smaller batches)",
                         status_code=413)
    body = request.data if isinstance(request.data, bytes) else b""
    if len(body) > limit:
        raise InputError(f"the body has more than {limit:,} bytes; send smaller batches", status_code=413)
    try:
        return ingest.decompress(body, request.META.get("HTTP_CONTENT_ENCODING"), limit=settings.TELEMETRY_MAX_UNPACKED_BYTES)
    except ingest.BatchError as exc:
        raise InputError(str(exc)) from exc


def _scope(request):
    """(cluster override, allowed hosts, time window, sender) for the caller."""
    job = token_job(request)
    if job is None:
        return None, None, None, request.user.get_username()
    start = (job.start_time or job.submit_time or timezone.now()) - JOB_WINDOW_SLACK
    end = (job.end_time or timezone.now()) + JOB_WINDOW_SLACK
    return job.cluster.name, set(job.node_list or []), (start, end), f"job {job.cluster.name}/{job.job_id}"


def _store_and_record(request, frame, errors, *, source, sender, nbytes, rows):
    if len(frame):
        try:
            telemetry_store().write(frame)
        except TelemetryUnavailable as exc:
            raise InputError(str(exc), status_code=503) from exc
    batch = IngestBatch.objects.create(
        sender=sender[:200], source=source, cluster=frame["cluster"].iloc[0] if len(frame) else "",
        hosts=frame["host"].nunique() if len(frame) else 0, accepted=len(frame), rejected=rows - len(frame),
        bytes=nbytes, first_errors=[e for e in errors[:10]],
        created_by=request.user if getattr(request.user, "is_authenticated", False) and token_job(request) is None else None)
    body = {"accepted": len(frame), "rejected": rows - len(frame), "batch": batch.pk,
            "errors": errors[:ingest.MAX_REPORTED_ERRORS], "errors_truncated": len(errors) > ingest.MAX_REPORTED_ERRORS}
    if rows and not len(frame):
        detail = f"none of the {rows} samples was accepted; first problem: {errors[0]['message']}" if errors else "no samples"
        raise InputError(detail, [ErrorItem(message=e["message"], field=e.get("field"), line=e.get("line")) for e in errors[:20]])
    return Response(body, status=status.HTTP_200_OK)


class SampleIngestView(APIView):
    """Post samples: a JSON array, ``{"samples": [...]}`` or NDJSON, optionally gzip-compressed, of
    ``{"ts", "host", "gpu", "field", "value"}`` (+ ``cluster``, ``uuid``). ``field`` is a DCGM id or
    name. Good rows are stored (re-sending is harmless), bad rows are reported by row and line."""

    authentication_classes = TELEMETRY_AUTHENTICATION
    permission_classes = [CanPostTelemetry]
    parser_classes = [RawBodyParser]

    @extend_schema(request={"application/json": {"type": "array", "items": {"type": "object"}},
                            "application/x-ndjson": {"type": "string"}},
                   parameters=[OpenApiParameter("cluster", str, description="cluster of samples that name none")],
                   responses={200: {"type": "object"}})
    def post(self, request):
        data = _read_body(request)
        try:
            samples = ingest.split_samples(data, request.content_type)
        except ingest.BatchError as exc:
            raise InputError(str(exc)) from exc
        if len(samples) > settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST:
            raise InputError(f"{len(samples):,} samples in one request; at most {settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST:,}",
                             status_code=413)
        cluster, hosts, window, sender = _scope(request)
        parsed = ingest.parse_batch(samples, now=timezone.now(), default_cluster=request.query_params.get("cluster", ""),
                                    allowed_hosts=hosts, window=window, cluster_override=cluster)
        return _store_and_record(request, parsed.frame, [e.as_dict() for e in parsed.errors], source="samples",
                                 sender=sender, nbytes=len(data), rows=parsed.rows)


class SeriesView(APIView):
    """Samples or bucketed statistics for one job (``job=cluster/id``, any job you may see) or, for
    staff, any hosts. ``step`` (seconds) gives count/mean/min/max per bucket instead of raw samples."""

    authentication_classes = TELEMETRY_AUTHENTICATION

    @extend_schema(parameters=[
        OpenApiParameter("job", str, description="cluster/job_id: the job's nodes and run time"),
        OpenApiParameter("host", str, many=True), OpenApiParameter("gpu", int, many=True),
        OpenApiParameter("field", str, many=True, description="DCGM ids or names"),
        OpenApiParameter("start", str), OpenApiParameter("end", str), OpenApiParameter("step", int),
        OpenApiParameter("stats", str, description="comma list of mean,min,max,p10,p50,p90")],
        responses={200: {"type": "object"}})
    def get(self, request):
        params = request.query_params
        errors = []
        start = end = None
        for name in ("start", "end"):
            if params.get(name):
                try:
                    moment = ingest.parse_timestamp(params[name])
                except ValueError as exc:
                    errors.append(ErrorItem(message=str(exc), field=name))
                    continue
                start, end = (moment, end) if name == "start" else (start, moment)
        fields = []
        for value in params.getlist("field"):
            for item in value.split(","):
                try:
                    fields.append(lookup(item).id)
                except UnknownField as exc:
                    errors.append(ErrorItem(message=str(exc), field="field"))
        gpus = []
        for value in params.getlist("gpu"):
            if not value.isdigit():
                errors.append(ErrorItem(message=f"{value!r} is not a GPU index", field="gpu"))
            else:
                gpus.append(int(value))
        step = params.get("step")
        if step is not None and (not step.isdigit() or int(step) < 1):
            errors.append(ErrorItem(message="step is a whole number of seconds >= 1", field="step"))
        stats = tuple(s for s in params.get("stats", "mean,min,max").split(",") if s)
        if errors:
            raise InputError("the series request has problems", errors)
        hosts = params.getlist("host") or None
        cluster = params.get("cluster")
        job_param = params.get("job")
        if job_param:
            cluster_name, _, job_id = job_param.partition("/")
            job = job_get_for_user(request.user, cluster_name, int(job_id), token_job(request)) if job_id.isdigit() else None
            if job is None:
                raise Http404
            cluster = job.cluster.name
            job_hosts = list(job.node_list or [])
            hosts = [h for h in (hosts or job_hosts) if h in set(job_hosts)]
            start = max(start, job.start_time) if start and job.start_time else (start or job.start_time or job.submit_time)
            end = min(end, job.end_time) if end and job.end_time else (end or job.end_time or timezone.now())
        elif not (request.user.is_authenticated and request.user.is_staff and token_job(request) is None):
            raise InputError("give job=<cluster>/<job_id> (a job you may see); only staff may read hosts directly",
                             [ErrorItem(message="required", field="job")], status_code=400)
        if not start or not end or end <= start:
            raise InputError("start and end (ISO 8601) are needed, with end after start",
                             [ErrorItem(message="required", field="start")])
        query = Query(start=start, end=end, cluster=cluster, hosts=tuple(hosts) if hosts else None,
                      gpus=tuple(gpus) or None, fields=tuple(fields) or None)
        try:
            store = telemetry_store()
            frame = store.aggregate(query, int(step), stats) if step else store.read(query)
        except TelemetryUnavailable as exc:
            raise InputError(str(exc), status_code=503) from exc
        except ValueError as exc:
            raise InputError(str(exc), [ErrorItem(message=str(exc), field="stats")]) from exc
        limit = settings.TELEMETRY_MAX_SERIES_ROWS
        truncated = len(frame) > limit
        frame = frame.head(limit)
        time_column = "bucket" if step else "ts"
        frame = frame.assign(**{time_column: frame[time_column].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
        return Response({"start": start.isoformat(), "end": end.isoformat(), "step": int(step) if step else None,
                         "columns": list(frame.columns), "rows": frame.to_numpy().tolist(), "truncated": truncated})



class FormatIsOurs(DefaultContentNegotiation):
    """``?format=`` names the input format here (the issue's API), not DRF's output-format override."""

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


class ImportView(APIView):
    """Import text that DCGM tools print: ``format=dcgmi-dmon`` (needs ``host`` and ``start``, and
    ``interval`` in seconds, default 1) or ``format=dcgm-exporter`` (Prometheus text; ``host`` and
    ``ts`` fill in what the text lacks). Bad lines are reported by number; good ones are stored."""

    authentication_classes = TELEMETRY_AUTHENTICATION
    permission_classes = [CanPostTelemetry]
    parser_classes = [RawBodyParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FormatIsOurs
    FORMATS = ("dcgmi-dmon", "dcgm-exporter")

    @extend_schema(request={"text/plain": {"type": "string"}}, parameters=[
        OpenApiParameter("format", str, enum=list(FORMATS), required=True), OpenApiParameter("host", str),
        OpenApiParameter("cluster", str), OpenApiParameter("start", str), OpenApiParameter("interval", float),
        OpenApiParameter("ts", str)], responses={200: {"type": "object"}})
    def post(self, request):
        from .. import importers

        params = request.query_params
        kind = params.get("format")
        if kind not in self.FORMATS:
            raise InputError(f"format must be one of {', '.join(self.FORMATS)}", [ErrorItem(message="unknown format", field="format")])
        data = _read_body(request)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"the body is not UTF-8 text (byte {exc.start})") from exc
        cluster, hosts, window, sender = _scope(request)
        cluster = cluster or params.get("cluster", "")
        if not cluster:
            raise InputError("give cluster=<name> for imported text", [ErrorItem(message="required", field="cluster")])
        try:
            if kind == "dcgmi-dmon":
                interval = float(params.get("interval", "1"))
                result = importers.parse_dcgmi_dmon(text, host=params.get("host", ""), cluster=cluster,
                                                    start=params.get("start"), interval_s=interval)
            else:
                result = importers.parse_dcgm_exporter(text, host=params.get("host") or None, cluster=cluster,
                                                       ts=params.get("ts") or None)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        frame = result.frame
        errors = [dict(error) for error in result.errors]
        if hosts is not None or window is not None:
            allowed = frame["host"].isin(hosts) if hosts is not None else True
            inside = frame["ts"].between(window[0], window[1]) if window is not None else True
            keep = allowed & inside
            if not bool(keep.all()):
                errors.append({"line": None, "column": None,
                               "message": f"{int((~keep).sum())} samples are outside the job's nodes or run time and were dropped"})
                frame = frame[keep]
        dropped = result.samples - len(frame)
        return _store_and_record(request, frame, errors, source=kind, sender=sender, nbytes=len(data),
                                 rows=len(frame) + len(result.errors) + dropped)
