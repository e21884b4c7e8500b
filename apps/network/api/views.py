"""Network endpoints of a job: /api/v1/jobs/<cluster>/<job_id>/network/ (per-NIC rates, retry fractions, totals,
findings) and .../network/heatmap/ (one NIC metric as a compact heatmap in the GPU heatmaps' row orders).
Thin: validate, call a selector, answer. Readable by whoever may see the job, and by the job's own token."""
import numpy as np
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.heatmaps import heatmap_options
from apps.core.api.params import parse_query
from apps.jobs.access import job_for_request

from .. import selectors
from ..panel import verdict
from .serializers import NetworkHeatmapParams, NetworkParams

_ANY = inline_serializer("NetworkAnswer", fields={"job": serializers.CharField(), "verdict": serializers.CharField(),
                                                  "findings": serializers.ListField(child=serializers.DictField()),
                                                  "nics": serializers.ListField(child=serializers.DictField())})


class NetworkView(APIView):
    """The job's NICs: ``times`` (bucket starts) and per NIC (``nics``, in the job's node order, NIC index within a
    node) the ``series`` of tx/rx bytes/s, packets/s, retry fraction (Δretries / Δpackets sent) and link-down events;
    per NIC totals; ``findings``: the NICs that stand out from the job's others, each with its sentence and counters;
    ``groups``: the job's NIC traffic per dragonfly group."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[NetworkParams], responses={200: _ANY})
    def get(self, request, cluster: str, job_id: int):
        job = job_for_request(request, cluster, job_id)
        params = parse_query(request, NetworkParams)
        return Response(selectors.network_body(job, start=params.get("start"), end=params.get("end"),
                                               series=params["series"] == "all", verdict=verdict))


class NetworkHeatmapView(APIView):
    """One NIC metric per NIC over time, compact like the GPU heatmaps (apps/core/heatmaps.py)."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[NetworkHeatmapParams], responses={200: inline_serializer(
        "NetworkHeatmap", fields={"metric": serializers.CharField(), "z": serializers.CharField()})})
    def get(self, request, cluster: str, job_id: int):
        job = job_for_request(request, cluster, job_id)
        params = parse_query(request, NetworkHeatmapParams)
        options = heatmap_options(params)
        body = selectors.heatmap(job, metric=params["metric"], mode=options["mode"], sort=params["sort"], bins=params["bins"],
                                 start=options["start"], end=options["end"], rows_mode=options["rows_mode"])
        return Response({"job": f"{cluster}/{job_id}", **_plain(body)})


def _plain(value):
    """numpy numbers to Python's (the renderer's JSON knows no float32)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
