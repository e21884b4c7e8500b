"""Saturation endpoints, next to the job they belong to: the score, the heatmap, the stragglers, downloads."""
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from apps.core import heatmaps
from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.conditional import ConditionalProductMixin, ProductVersion, row_version
from apps.core.api.exceptions import InputError
from apps.core.api.heatmaps import HeatmapOptions, heatmap_options
from apps.core.api.params import QueryIntegerField
from apps.core.exports import FORMATS, table_bytes
from apps.jobs.authentication import token_job
from apps.jobs.selectors import job_get_for_user
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.selectors import host_heatmap_rows

from ..choices import JobSaturationStatusChoices
from ..models import JobSaturation
from ..products import METRICS, SORTS, SaturationCube, gpu_table, heatmap_order, rebin, scaled_integers, series_table
from ..scoring import DEFAULT_MODEL, MODELS
from ..selectors import gpu_models
from ..stragglers import peer_groups
from .openapi import HeatmapResponse, SaturationResponse

TABLES = ("gpus", "series")


def _record(request, cluster, job_id) -> JobSaturation:
    job = job_get_for_user(request.user, cluster, job_id, token_job(request))
    if job is None:
        raise Http404
    record = JobSaturation.objects.filter(job=job).first()
    if record is None or record.status != JobSaturationStatusChoices.STATUS_READY:
        state = record.get_status_display() if record else "not scored yet"
        if record and record.scoring_since:
            state += f"; scoring since {record.scoring_since:%Y-%m-%d %H:%M:%S} UTC"
        raise InputError(f"no saturation result for this job: {state}" + (f" ({record.message})" if record and record.message else ""),
                         status_code=404)
    return record


def load_product(record: JobSaturation | dict, metrics=None) -> SaturationCube:
    """The product file of a ready row (or of its ``saturation_head``), with just ``metrics`` decompressed."""
    product = record["product"] if isinstance(record, dict) else record.product
    path = Path(settings.DATA_DIR) / product
    if not product or not path.exists():
        raise InputError("the saturation product file is missing; it is rebuilt at the job's next scoring", status_code=404)
    cube = SaturationCube.load(path, metrics)
    missing = [m for m in (metrics or ()) if m not in cube.values]
    if missing:
        raise InputError(f"this job's product predates {', '.join(missing)}; it is rebuilt at the job's next scoring",
                         status_code=404)
    return cube


# The row's small fields: one cheap query gives access, the 404 reasons and the answers' version. The big
# JSON fields (per_gpu, stragglers) are written only together with a new ``computed`` and product.
_HEAD_FIELDS = tuple(field.attname for field in JobSaturation._meta.concrete_fields if field.name not in ("per_gpu", "stragglers"))
_PRODUCT_FIELDS = ("id", "job_id", "computed", "product")


def saturation_head(request, cluster, job_id, *, holder=None) -> dict:
    """The caller's job's ready result without its big fields (``.values()``), or the same 404s as ``_record``.
    ``holder`` (a view) gets the job as ``holder.job`` (the heatmap's host row reads its nodes)."""
    job = job_get_for_user(request.user, cluster, job_id, token_job(request))
    if job is None:
        raise Http404
    if holder is not None:
        holder.job = job
    head = JobSaturation.objects.filter(job=job).values(*_HEAD_FIELDS).first()
    if head is None or head["status"] != JobSaturationStatusChoices.STATUS_READY:
        state = JobSaturation(**head).get_status_display() if head else "not scored yet"
        if head and head["scoring_since"]:
            state += f"; scoring since {head['scoring_since']:%Y-%m-%d %H:%M:%S} UTC"
        raise InputError(f"no saturation result for this job: {state}" + (f" ({head['message']})" if head and head["message"] else ""),
                         status_code=404)
    return head


def saturation_version(head: dict, *, whole_row: bool = False) -> ProductVersion:
    """The version of answers built from the job's product (its row pk, computed time and file), or from every
    small field of the row (``whole_row``: answers that also show the scoring state, message, flags)."""
    return row_version(head if whole_row else {name: head[name] for name in _PRODUCT_FIELDS}, job=head["job_id"],
                       modified="computed")


class SaturationView(ConditionalProductMixin, APIView):
    """The job's saturation score (0-100) with its components, limiter, labels and per-GPU numbers."""

    authentication_classes = JOB_API_AUTHENTICATION

    def product_version(self, request, cluster, job_id):
        self.head = saturation_head(request, cluster, job_id)
        return saturation_version(self.head, whole_row=True)

    @extend_schema(responses={200: SaturationResponse})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        record = JobSaturation.objects.get(pk=self.head["id"])
        return {
            "job_score": record.score, "components": {"compute": record.compute, "memory": record.memory, "link": record.link},
            "limiter": record.limiter, "labels": record.labels, "flags": record.flags,
            "window": {"start": record.window_start, "end": record.window_end, "steady_start": record.steady_start},
            "imbalance": record.imbalance, "idle_gpus": record.idle_gpus,
            "energy_j": record.energy_j, "energy_low_saturation_j": record.energy_low_j,
            "gpu_model": record.gpu_model, "step_seconds": record.step_seconds,
            "computed": record.computed, "per_gpu": record.per_gpu,
            # A scoring in progress (or one that did not finish) leaves this result in place.
            "scoring_since": record.scoring_since, "message": record.message,
        }


COMPACT_OPTIONS = ("mode", "rows", "start", "end")


class HeatmapParams(HeatmapOptions):
    metric = serializers.ChoiceField(choices=list(METRICS), default="S",
                                     error_messages={"invalid_choice": f"choose one of {', '.join(METRICS)}"})
    bins = QueryIntegerField(min_value=1, max_value=2000, default=300,
                             error_messages={"min_value": "bins is a whole number from 1 to 2000",
                                             "max_value": "bins is a whole number from 1 to 2000"})
    sort = serializers.ChoiceField(choices=list(SORTS), default="rank",
                                   error_messages={"invalid_choice": f"choose one of {', '.join(SORTS)}"})
    encoding = serializers.ChoiceField(choices=["json", "u8"], required=False,
                                       error_messages={"invalid_choice": "choose json or u8"},
                                       help_text="json: integer values per GPU (the default without mode, rows, start and end); "
                                                 "u8: the compact answer (the default with any of them)")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        given = [name for name in COMPACT_OPTIONS if attrs.get(name)]
        if attrs.get("encoding") == "json" and given:
            raise serializers.ValidationError({name: f"{name} needs encoding=u8 (the json answer knows metric, sort and bins)"
                                               for name in given})
        attrs["encoding"] = attrs.get("encoding") or ("u8" if given else "json")
        return attrs


def _job_facts(gpu_model: str) -> heatmaps.ModelFacts:
    """Physical facts of the GPU model the job was scored against (staff's table, else the built-in one)."""
    return heatmaps.facts_of(gpu_models().get(gpu_model) or MODELS.get(gpu_model) or DEFAULT_MODEL)


@dataclass(frozen=True)
class _RowParts:
    """What every heatmap answer of one scoring needs from the row's per-GPU list, worked out once."""

    per_gpu: list
    rows: list
    groups: np.ndarray
    peers: str
    orders: dict = field(default_factory=dict)  # sort -> display order, filled as asked

    def order(self, sort: str) -> list[int]:
        if sort not in self.orders:
            self.orders[sort] = heatmap_order(self.per_gpu, sort)
        return self.orders[sort]


_ROW_PARTS: "OrderedDict[tuple, _RowParts]" = OrderedDict()
_ROW_PARTS_KEPT = 4  # scorings whose parts a process keeps (a job page's metric switches all hit one)
_ROW_PARTS_LOCK = threading.Lock()


def _row_parts(head: dict) -> _RowParts:
    """The row parts of the scoring ``head`` names (its pk, computed time and product file): a metric switch
    at 4,096 GPUs then skips reading and walking the per-GPU JSON again (about half of its server time)."""
    key = (head["id"], head["computed"], head["product"])
    with _ROW_PARTS_LOCK:
        parts = _ROW_PARTS.get(key)
        if parts is not None:
            _ROW_PARTS.move_to_end(key)
            return parts
    per_gpu = JobSaturation.objects.filter(pk=head["id"]).values_list("per_gpu", flat=True).first() or []
    groups, peers = peer_groups(pd.DataFrame(per_gpu, columns=["pp", "tp"]))
    parts = _RowParts(per_gpu=per_gpu, rows=[{key: gpu.get(key) for key in heatmaps.ROW_KEYS} for gpu in per_gpu],
                      groups=groups, peers=peers)
    with _ROW_PARTS_LOCK:
        _ROW_PARTS[key] = parts
        while len(_ROW_PARTS) > _ROW_PARTS_KEPT:
            _ROW_PARTS.popitem(last=False)
    return parts


def compact_heatmap(head: dict, params: dict) -> dict:
    """The compact answer (``apps.core.heatmaps.compact``) for one metric of the job's product: peers for the
    deviation mode are the straggler detector's, the warm-up shaded only where the data has one. ``head`` is
    the row without its big fields (``saturation_head``)."""
    metric, sort = params["metric"], params["sort"]
    cube = load_product(head, [metric])
    parts = _row_parts(head)
    options = heatmap_options(params)
    body = heatmaps.compact(heatmaps.Binned(cube.values[metric], cube.bin_starts, cube.bin_seconds), parts.rows,
                            quantity=heatmaps.SATURATION_QUANTITIES[metric], facts=_job_facts(head["gpu_model"]),
                            peer_groups=parts.groups, order=parts.order(sort), sort=sort, bins=params["bins"], **options)
    first = body["coverage"]["first"]
    shading = heatmaps.warmup_shading(cube.warmup_end, None if first is None else np.datetime64(first.rstrip("Z")),
                                      options["start"], options["end"])
    described = METRICS[metric]
    return {"metric": metric, "title": described.title, "unit": described.unit, **body,
            "steady_start": heatmaps.iso(cube.warmup_end), "shading": shading,
            "peers": parts.peers if options["mode"] == "deviation" else None}


class HeatmapView(ConditionalProductMixin, APIView):
    """A GPU x time matrix of one metric from the job's saturation product (no scoring on request).

    Without ``encoding``, ``mode``, ``rows``, ``start`` and ``end``: ``values[row][column] x scale`` is the
    metric's mean for that GPU (``rows[row]``) and time bin (``times[column]``, bins of ``bin_seconds``), in
    ``unit`` (a fraction when empty); null where the GPU reported nothing. Rows follow ``sort``.

    With ``encoding=u8`` (the default when any of the others is given): the compact answer the job page
    draws — bytes over a fixed physical colour range (``scale``), ``mode=deviation`` for value minus the
    median of the GPU's peers (the straggler detector's), rows aggregated by node above 1,024 GPUs keeping
    each cell's worst member and the mean, bins covering just the ``start``-``end`` window."""

    authentication_classes = JOB_API_AUTHENTICATION
    product_params_class = HeatmapParams

    def product_version(self, request, cluster, job_id):
        self.head = saturation_head(request, cluster, job_id, holder=self)
        return saturation_version(self.head)

    @extend_schema(parameters=[HeatmapParams], responses={200: HeatmapResponse})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        if params["encoding"] == "u8":
            body = compact_heatmap(self.head, params)
            try:  # issue 39: the host under the GPU rows, on the same bins
                body["host"] = host_heatmap_rows(self.job, body["times"], body["bin_seconds"])
            except TelemetryUnavailable:
                body["host"] = []
            return body
        record = JobSaturation.objects.get(pk=self.head["id"])
        metric, sort, bins = params["metric"], params["sort"], params["bins"]
        cube = load_product(record, [metric])
        matrix, starts, seconds = rebin(cube.values[metric], cube.bin_starts, cube.bin_seconds, bins)
        order = heatmap_order(record.per_gpu, sort)
        described = METRICS[metric]
        return {
            "metric": metric, "title": described.title, "unit": described.unit, "scale": described.scale, "sort": sort,
            "bin_seconds": seconds,
            "times": [str(np.datetime_as_string(t, unit="s")) + "Z" for t in starts],
            "steady_start": record.steady_start,
            "rows": [{key: record.per_gpu[i].get(key) for key in ("host", "gpu", "rank", "pp", "dp", "tp", "group", "switch", "score")}
                     for i in order],
            "values": scaled_integers(matrix[order], described.scale),
        }


class StragglersView(ConditionalProductMixin, APIView):
    """GPUs, nodes and switches that lag their peers: the signal, its robust z-score, how long, where, and why."""

    authentication_classes = JOB_API_AUTHENTICATION

    def product_version(self, request, cluster, job_id):
        self.head = saturation_head(request, cluster, job_id)
        return saturation_version(self.head)

    @extend_schema(responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        return JobSaturation.objects.filter(pk=self.head["id"]).values_list("stragglers", flat=True).get()


class DownloadView(APIView):
    """The per-GPU table (``gpus``) or the binned time series of every metric (``series``), as CSV or Parquet."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[OpenApiParameter("table", str, OpenApiParameter.PATH, enum=list(TABLES)),
                               OpenApiParameter("extension", str, OpenApiParameter.PATH, enum=list(FORMATS))],
                   responses={(200, "text/csv"): OpenApiTypes.BINARY, (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY})
    def get(self, request, cluster, job_id, table, extension):
        if table not in TABLES or extension not in FORMATS:
            raise InputError(f"download {'|'.join(TABLES)}.{'|'.join(FORMATS)}, not {table}.{extension}", status_code=404)
        record = _record(request, cluster, job_id)
        frame = gpu_table(record.per_gpu) if table == "gpus" else series_table(load_product(record), record.per_gpu)
        response = HttpResponse(table_bytes(frame, extension), content_type=FORMATS[extension])
        response["Content-Disposition"] = f'attachment; filename="saturation-{cluster}-{job_id}-{table}.{extension}"'
        return response
