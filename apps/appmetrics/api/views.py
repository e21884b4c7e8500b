"""Application-metrics endpoints: /api/v1/jobs/<cluster>/<job_id>/metrics/, .../model/, .../efficiency/ and
/api/v1/jobs/compare/. Thin: validate, call a service or selector, answer."""
from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import ErrorItem, InputError, flatten_validation_detail
from apps.core.api.negotiation import FormatIsOurs
from apps.core.api.params import parse_query
from apps.core.api.parsers import BoundedJSONParser, BoundedStream, StreamParser
from apps.jobs.access import job_for_request
from apps.jobs.services import job_run_name_set

from .. import selectors, services
from ..flops import ModelConfig, formula_words, model_flops_per_token
from ..series import series_body
from .openapi import EfficiencyResponse, MetricsIngestResponse, MetricsResponse, ModelResponse
from .serializers import MetricsGetParams, MetricsPostParams, ModelConfigSerializer


def job_for(request, cluster: str, job_id: int, *, write: bool = False):
    """The job (404 when the caller may not see it); writes: its user, staff or its own token (the jobs app's rule)."""
    return job_for_request(request, cluster, job_id, write=write, what="send its metrics or build its report")


def _refused(exc: services.MetricsRefused) -> InputError:
    return InputError(str(exc), [ErrorItem(message, field=where) for where, message in exc.problems])


class MetricsView(APIView):
    """The job's application series. POST rows (``{"rows": [{"ts", "step", "tokens_per_s", ...}]}``), the job's
    Megatron-LM output (``?format=megatron-log``, text/plain, read line by line) or a TensorBoard event file
    (``?format=tensorboard``); GET them back by name. A bad JSON row refuses the batch, naming every problem; a row
    dated outside the job's write window (its run time ± JOB_WRITE_MARGIN_MINUTES) is such a problem. Values of a log
    or event file dated outside it are dropped and counted in ``errors``."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [BoundedJSONParser, StreamParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FormatIsOurs  # ?format= names what is posted

    @extend_schema(parameters=[MetricsGetParams], responses={200: MetricsResponse})
    def get(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id)
        params = parse_query(request, MetricsGetParams)
        frame = selectors.job_series(job, names=params.get("names"), start=params.get("since"), end=params.get("until"))
        return Response({"job": f"{cluster}/{job_id}", **series_body(frame, params["max_points"])})

    @extend_schema(parameters=[MetricsPostParams],
                   request={"application/json": {"type": "object", "properties": {
                       "rows": {"type": "array", "items": {"type": "object"}},
                       "run": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}$",
                               "description": "The training run this job belongs to (its campaign), as --comment run=NAME."}}},
                            "text/plain": {"type": "string"}, "application/octet-stream": {"type": "string", "format": "binary"}},
                   responses={201: MetricsIngestResponse})
    def post(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id, write=True)
        kind = parse_query(request, MetricsPostParams)["format"]
        window = job.write_window()  # every writer's rows: the job's run time ± JOB_WRITE_MARGIN_MINUTES
        if kind == "json":
            if request.content_type.split(";")[0].strip() != "application/json":
                raise InputError("Send rows as application/json, or name the format: ?format=megatron-log or ?format=tensorboard.",
                                 [ErrorItem("unexpected content type", field="format")], status_code=415)
            data = request.data
            rows = data.get("rows") if isinstance(data, dict) else data
            run = data.get("run") if isinstance(data, dict) else None
            if run is not None:  # the training run the client names: the job's campaign (apps.campaigns)
                try:
                    job_run_name_set(job, run)
                except ValueError as exc:
                    raise InputError(f"run: {exc}.", [ErrorItem(str(exc), field="run")]) from None
            try:
                written = services.metrics_ingest(job, rows, source="api", window=window)
            except services.MetricsRefused as exc:
                raise _refused(exc) from None
            answer = {"rows": written, "errors": []} | ({"run": run} if run is not None else {})
        else:
            stream = request.data if hasattr(request.data, "read") else None
            if stream is None:
                raise InputError(f"Send the {kind} as the request body (text/plain or application/octet-stream), not as JSON.",
                                 [ErrorItem("no body", field="format")])
            if kind == "megatron-log":
                answer = services.training_log_import(job, BoundedStream(stream, settings.APPMETRICS_MAX_LOG_BYTES).lines(),
                                                      window=window)
            else:
                data = BoundedStream(stream, settings.APPMETRICS_MAX_TENSORBOARD_BYTES).read()
                answer = services.tensorboard_import(job, data, window=window)
        return Response({"job": f"{cluster}/{job_id}", "format": kind, **answer}, status=status.HTTP_201_CREATED)


def _model_body(job) -> dict:
    record = selectors.model_config(job)
    if record is None:
        raise InputError("This job has no model config yet: PUT its shape here, or upload the Megatron-LM log "
                         "(POST .../metrics/?format=megatron-log) with its argument dump.", status_code=404)
    body = selectors.model_config_dict(record)
    config = ModelConfig.from_dict(body)
    return {**body, "model_flops_per_token": model_flops_per_token(config), "formula": formula_words(config)}


class ModelView(APIView):
    """The model the job trains, for FLOPs per token and MFU: layers, hidden, heads, sequence length, vocabulary,
    global batch, MoE experts and top-k; the GPU peak from the GPU model unless given."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: ModelResponse})
    def get(self, request, cluster: str, job_id: int):
        return Response(_model_body(job_for(request, cluster, job_id)))

    @extend_schema(request=ModelConfigSerializer, responses={200: ModelResponse})
    def put(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id, write=True)
        serializer = ModelConfigSerializer(data=request.data if isinstance(request.data, dict) else {})
        if not serializer.is_valid():
            problems = flatten_validation_detail(serializer.errors)
            raise InputError(f"The model config has {len(problems)} problem(s): {problems[0].field}: {problems[0].message}", problems)
        try:
            services.model_config_set(job, serializer.validated_data)
        except ValueError as exc:
            raise InputError(str(exc), [ErrorItem(str(exc))]) from None
        return Response(_model_body(job))


class EfficiencyView(APIView):
    """Tokens/s per GPU, MFU against the GPU's dense peak, model FLOPs per token, energy per token and the throughput
    dips with their causes; ``missing`` says why a number is absent."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(responses={200: EfficiencyResponse})
    def get(self, request, cluster: str, job_id: int):
        return Response(selectors.job_efficiency(job_for(request, cluster, job_id)))
