"""Saturation endpoints, next to the job they belong to: the score, the heatmap, the stragglers."""
from pathlib import Path

import numpy as np
from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.jobs.api.views import JOB_API_AUTHENTICATION
from apps.jobs.authentication import token_job
from apps.jobs.selectors import job_get_for_user

from ..models import JobSaturation
from ..products import METRICS, SaturationCube

SORTS = ("rank", "node", "pp", "dp", "score")


def _record(request, cluster, job_id) -> JobSaturation:
    job = job_get_for_user(request.user, cluster, job_id, token_job(request))
    if job is None:
        raise Http404
    record = JobSaturation.objects.filter(job=job).first()
    if record is None or record.status != "ready":
        state = record.get_status_display() if record else "not scored yet"
        raise InputError(f"no saturation result for this job: {state}" + (f" ({record.message})" if record and record.message else ""),
                         status_code=404)
    return record


class SaturationView(APIView):
    """The job's saturation score (0-100) with its components, limiter, labels and per-GPU numbers."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(responses={200: {"type": "object"}})
    def get(self, request, cluster, job_id):
        record = _record(request, cluster, job_id)
        return Response({
            "job_score": record.score, "components": {"compute": record.compute, "memory": record.memory, "link": record.link},
            "limiter": record.limiter, "labels": record.labels, "flags": record.flags,
            "window": {"start": record.window_start, "end": record.window_end, "steady_start": record.steady_start},
            "imbalance": record.imbalance, "idle_gpus": record.idle_gpus,
            "energy_j": record.energy_j, "energy_low_saturation_j": record.energy_low_j,
            "computed": record.computed, "per_gpu": record.per_gpu,
        })


class HeatmapView(APIView):
    """A GPU x time matrix of one metric from the job's saturation product (no scoring on request)."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[OpenApiParameter("metric", str, enum=list(METRICS)), OpenApiParameter("bins", int),
                               OpenApiParameter("sort", str, enum=list(SORTS))], responses={200: {"type": "object"}})
    def get(self, request, cluster, job_id):
        record = _record(request, cluster, job_id)
        metric = request.query_params.get("metric", "S")
        sort = request.query_params.get("sort", "rank")
        bins_text = request.query_params.get("bins", "300")
        errors = []
        if metric not in METRICS:
            errors.append(ErrorItem(message=f"choose one of {', '.join(METRICS)}", field="metric"))
        if sort not in SORTS:
            errors.append(ErrorItem(message=f"choose one of {', '.join(SORTS)}", field="sort"))
        if not bins_text.isdigit() or not 1 <= int(bins_text) <= 2000:
            errors.append(ErrorItem(message="bins is a whole number from 1 to 2000", field="bins"))
        if errors:
            raise InputError("the heatmap request has problems", errors)
        cube = SaturationCube.load(Path(settings.DATA_DIR) / record.product)
        matrix, starts, seconds = rebin(cube.values[metric], cube.bin_starts, cube.bin_seconds, int(bins_text))
        order = heatmap_order(record.per_gpu, sort)
        return Response({
            "metric": metric, "sort": sort, "bin_seconds": seconds,
            "times": [str(np.datetime_as_string(t, unit="s")) + "Z" for t in starts],
            "steady_start": record.steady_start,
            "rows": [{key: record.per_gpu[i].get(key) for key in ("host", "gpu", "rank", "pp", "dp", "tp", "score")} for i in order],
            "values": [[None if not np.isfinite(v) else round(float(v), 4) for v in matrix[i]] for i in order],
        })


class StragglersView(APIView):
    """GPUs and nodes that lag their peers, with the signal, its robust z-score, duration and a reason."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request, cluster, job_id):
        return Response(_record(request, cluster, job_id).stragglers)


def rebin(matrix: np.ndarray, starts: np.ndarray, seconds: float, bins: int):
    """Merge adjacent time bins (NaN-aware means) so there are at most ``bins`` columns."""
    columns = matrix.shape[1]
    if columns <= bins:
        return matrix, starts, seconds
    per = int(np.ceil(columns / bins))
    edges = np.arange(0, columns, per)
    valid = np.isfinite(matrix)
    sums = np.add.reduceat(np.where(valid, matrix, 0.0), edges, axis=1)
    counts = np.add.reduceat(valid.astype(int), edges, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        merged = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return merged, starts[edges], seconds * per


def heatmap_order(per_gpu: list[dict], sort: str) -> list[int]:
    big = 10**9

    def key(i):
        gpu = per_gpu[i]
        if sort == "rank":
            return (gpu.get("rank") if gpu.get("rank") is not None else big, i)
        if sort in ("pp", "dp"):
            return (gpu.get(sort) if gpu.get(sort) is not None else big, gpu.get("rank") or big, i)
        if sort == "score":
            return (gpu.get("score") if gpu.get("score") is not None else big, i)
        return (i,)  # node: the job's node order

    return sorted(range(len(per_gpu)), key=key)
