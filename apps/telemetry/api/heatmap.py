"""Job-scoped telemetry endpoints: the GPU × time heatmap of any field (compact, see apps/core/heatmaps.py)
and the node × field min/mean/max table. Mounted next to the job, at /api/v1/jobs/<cluster>/<job_id>/telemetry/."""
from pathlib import Path

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from apps.core import heatmaps
from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.conditional import ConditionalProductMixin, row_version
from apps.core.api.exceptions import InputError
from apps.core.api.heatmaps import HeatmapOptions, heatmap_options
from apps.core.api.params import CommaListField, QueryIntegerField
from apps.core.gpu_models import gpu_model_for
from apps.jobs.authentication import token_job
from apps.jobs.selectors import job_get_for_user

from ..choices import JobTelemetryStatusChoices
from ..fields import FIELDS, UnknownField, field_ids, lookup
from ..models import JobTelemetry
from ..backends.base import TelemetryUnavailable
from ..products import JobCube
from ..selectors import host_heatmap_rows
from .openapi import TelemetryHeatmapResponse, TelemetryNodesResponse

DEFAULT_FIELD = 1002  # SM activity, as on the job page


def _field_id(name) -> int:
    try:
        return lookup(name).id
    except UnknownField as exc:
        raise serializers.ValidationError(str(exc)) from None


class TelemetryHeatmapParams(HeatmapOptions):
    field = serializers.CharField(max_length=100, required=False, help_text="a DCGM id or name (default 1002, SM activity)")
    bins = QueryIntegerField(min_value=1, max_value=2000, default=300,
                             error_messages={"min_value": "bins is a whole number from 1 to 2000",
                                             "max_value": "bins is a whole number from 1 to 2000"})

    def validate_field(self, value):
        return _field_id(value)


class TelemetryNodesParams(serializers.Serializer):
    fields = CommaListField(child=serializers.CharField(max_length=100), required=False, max_length=100,
                            help_text="comma list of DCGM ids or names (default: every field of the job)")

    def validate_fields(self, names):
        try:
            return field_ids(names)
        except ValueError as exc:
            raise serializers.ValidationError(exc.args[0]) from None


_HEAD_FIELDS = ("id", "job_id", "status", "message", "materialized", "product")


def telemetry_head(request, cluster, job_id) -> tuple[object, dict]:
    """The job (visible to the caller, else 404 as if missing) and its telemetry record's small fields (404 saying
    why when there is no product)."""
    job = job_get_for_user(request.user, cluster, job_id, token_job(request))
    if job is None:
        raise Http404
    head = JobTelemetry.objects.filter(job=job).values(*_HEAD_FIELDS).first()
    if head is None or head["status"] != JobTelemetryStatusChoices.STATUS_READY or not head["product"]:
        state = JobTelemetry(**head).get_status_display().lower() if head else "not read from the telemetry store yet"
        raise InputError(f"no telemetry for this job: {state}" + (f" ({head['message']})" if head and head["message"] else ""),
                         status_code=404)
    return job, head


def product_file(head: dict) -> Path:
    path = Path(settings.DATA_DIR) / head["product"]
    if not path.exists():
        raise InputError("the telemetry product file is missing; it is rebuilt at the next refresh", status_code=404)
    return path


def load_cube(head: dict, fields=None) -> JobCube:
    """The job's cube, with ``fields`` only those fields (a 4,096-GPU cube is large; a view needs a few)."""
    return JobCube.load(product_file(head), fields)


FACT_FIELDS = (heatmaps.MAX_SM_CLOCK_FIELD, heatmaps.TEMPERATURE_FIELD, heatmaps.TEMPERATURE_MARGIN_FIELD,
               heatmaps.POWER_LIMIT_FIELD)


def _not_held(available: list[int], field_id: int, name: str) -> serializers.ValidationError:
    have = ", ".join(str(f) for f in available) or "none"
    return serializers.ValidationError({name: [f"field {field_id} is not in this job's telemetry (it has {have})"]})


class JobTelemetryProduct(ConditionalProductMixin):
    """ETag/Last-Modified, 304 and the rendered-answer cache (apps/core/api/conditional.py) for answers built
    from the job's telemetry cube: its version is the record's pk, materialisation time and product file."""

    def product_version(self, request, cluster, job_id):
        self.job, self.head = telemetry_head(request, cluster, job_id)
        return row_version({name: self.head[name] for name in ("id", "job_id", "materialized", "product")},
                           job=self.head["job_id"], modified="materialized")


def _mean_of(cube: JobCube, field_id: int):
    index = cube.field_index(field_id)
    return None if index is None else cube.mean[:, index, :]


def job_model_facts(job, cube: JobCube) -> heatmaps.ModelFacts:
    """The physical facts of the job's GPU model (from the app that keeps the per-model table, through
    apps.core.gpu_models), with DCGM's own max clock, slowdown margin and power limit preferred when the
    cube has them."""
    return heatmaps.with_measurements(heatmaps.facts_of(gpu_model_for(job)),
                                      max_sm_clock=_mean_of(cube, heatmaps.MAX_SM_CLOCK_FIELD),
                                      temperature=_mean_of(cube, heatmaps.TEMPERATURE_FIELD),
                                      temperature_margin=_mean_of(cube, heatmaps.TEMPERATURE_MARGIN_FIELD),
                                      power_limit=_mean_of(cube, heatmaps.POWER_LIMIT_FIELD))


class TelemetryHeatmapView(JobTelemetryProduct, APIView):
    """One DCGM field as a GPU × time heatmap of the job, compact: values quantised to a byte over the colour
    range (``scale``), rows aggregated by node above 1,024 GPUs keeping each cell's worst member; ``mode=deviation``
    shows each GPU minus the median of all GPUs of the job (telemetry knows no ranks)."""

    authentication_classes = JOB_API_AUTHENTICATION
    product_params_class = TelemetryHeatmapParams

    @extend_schema(parameters=[TelemetryHeatmapParams], responses={200: TelemetryHeatmapResponse})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        available = JobCube.fields_in(product_file(self.head))
        field_id = params.get("field") or (DEFAULT_FIELD if DEFAULT_FIELD in available
                                           else available[0] if available else DEFAULT_FIELD)
        if field_id not in available:
            raise _not_held(available, field_id, "field")
        cube = load_cube(self.head, {field_id, *FACT_FIELDS})
        index = cube.field_index(field_id)
        starts, (mean, low, high, count) = heatmaps.regular_grid(
            cube.buckets, cube.step, cube.mean[:, index, :], cube.min[:, index, :], cube.max[:, index, :], cube.count[:, index, :])
        described = FIELDS.get(field_id)
        unit = described.unit if described else ""
        quantity = heatmaps.telemetry_quantity(field_id, unit)
        rows = [{"host": str(host), "gpu": int(gpu)} for host, gpu in zip(cube.hosts, cube.gpus)]
        options = heatmap_options(params)
        body = heatmaps.compact(heatmaps.Binned(mean, starts, float(cube.step), low, high, count), rows, quantity=quantity,
                                facts=job_model_facts(self.job, cube), sort="node", bins=params["bins"], **options)
        peers = f"all {heatmaps.gpus_words(len(rows))} of the job (telemetry knows no ranks)"
        return {"metric": field_id, "title": described.display_name if described else str(field_id),
                "unit": quantity.unit, **body, "steady_start": None, "shading": [],
                "peers": peers if options["mode"] == "deviation" else None, "host": _host_rows(self.job, body)}


def _host_rows(job, body: dict) -> list[dict]:
    """The host row under the GPU rows (issue 39): CPU busy, data-loader CPU and host memory on the heatmap's bins."""
    try:
        return host_heatmap_rows(job, body.get("times") or [], body.get("bin_seconds") or 0.0)
    except TelemetryUnavailable:
        return []


class TelemetryNodesView(JobTelemetryProduct, APIView):
    """Node × field table (as in ClusterCockpit): each node's GPUs, and per field the minimum, the mean (weighted
    by sample counts) and the maximum over the node's GPUs and the job's run time."""

    authentication_classes = JOB_API_AUTHENTICATION
    product_params_class = TelemetryNodesParams

    @extend_schema(parameters=[TelemetryNodesParams], responses={200: TelemetryNodesResponse})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        available = JobCube.fields_in(product_file(self.head))
        field_ids = params.get("fields") or available
        for field_id in field_ids:
            if field_id not in available:
                raise _not_held(available, field_id, "fields")
        cube = load_cube(self.head, field_ids)
        indexes = [cube.field_index(f) for f in field_ids]
        hosts, gpus, stats = heatmaps.node_stats(cube.hosts, cube.count[:, indexes, :], cube.mean[:, indexes, :],
                                                  cube.min[:, indexes, :], cube.max[:, indexes, :])
        fields = [{"id": f, "name": FIELDS[f].display_name if f in FIELDS else str(f), "unit": FIELDS[f].unit if f in FIELDS else ""}
                  for f in field_ids]
        nodes = [{"host": host, "gpus": count, "stats": {str(f): stats[n][k] for k, f in enumerate(field_ids)}}
                 for n, (host, count) in enumerate(zip(hosts, gpus))]
        return {"fields": fields, "nodes": nodes}
