"""Per-GPU series of one metric for chosen GPUs, with their peers' median and 10-90 % band.

``GET /api/v1/jobs/<cluster>/<job_id>/saturation/series/?metric=S&gpus=nid001234:2,nid001235:0&bins=300&start=&end=``

The straggler against the GPUs it should look like (``apps/saturation/gpu_series.py`` computes it from
the job's product; nothing is scored on request). Same access as the other saturation endpoints;
answers carry ETag / Last-Modified and are cached by the product's version (``apps.core.api.conditional``).
"""
import re
from datetime import timezone as dt_timezone

import numpy as np
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.conditional import ConditionalProductMixin
from apps.core.api.exceptions import InputError
from apps.core.api.params import CommaListField, QueryIntegerField

from ..gpu_series import gpu_label, gpu_series, rounded
from ..models import JobSaturation
from ..products import METRICS
from .views import load_product, saturation_head, saturation_version

MAX_GPUS = 16
_GPU = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,199}):(?P<gpu>[0-9]{1,4})")


@extend_schema_field({"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*:[0-9]+$", "example": "nid001234:2"})
class GpuRefField(serializers.Field):
    """``host:gpu`` (e.g. ``nid001234:2``) as a ``(host, gpu)`` pair."""

    default_error_messages = {"invalid": "Give a GPU as <host>:<gpu index>, e.g. nid001234:2; not {value}."}

    def to_internal_value(self, data):
        found = _GPU.fullmatch(str(data).strip()) if isinstance(data, str) else None
        if found is None:
            self.fail("invalid", value=str(data)[:60])
        return found["host"], int(found["gpu"])

    def to_representation(self, value):
        return f"{value[0]}:{value[1]}"


class SaturationSeriesParams(serializers.Serializer):
    metric = serializers.ChoiceField(choices=list(METRICS), default="S",
                                     error_messages={"invalid_choice": f"choose one of {', '.join(METRICS)}"})
    gpus = CommaListField(child=GpuRefField(), required=False, max_length=MAX_GPUS, min_length=1,
                          help_text=f"Up to {MAX_GPUS} GPUs of the job, comma-separated host:gpu; the peers' band is the first one's. "
                                    "Default: the GPU of the job's first straggler finding, else its first rank.",
                          error_messages={"max_length": f"at most {MAX_GPUS} GPUs per request",
                                          "min_length": "name at least one GPU as host:gpu, or leave gpus out"})
    bins = QueryIntegerField(min_value=1, max_value=2000, default=300,
                             error_messages={"min_value": "bins is a whole number from 1 to 2000",
                                             "max_value": "bins is a whole number from 1 to 2000"})
    start = serializers.DateTimeField(required=False, help_text="ISO 8601; only bins that end after it.")
    end = serializers.DateTimeField(required=False, help_text="ISO 8601; only bins that start before it.")

    def validate(self, data):
        far = {name: "give a time between 1970 and 2200" for name in ("start", "end")
               if data.get(name) and not 1970 <= data[name].year <= 2200}  # numpy's nanoseconds wrap beyond
        if far:
            raise serializers.ValidationError(far)
        if data.get("start") and data.get("end") and data["end"] <= data["start"]:
            raise serializers.ValidationError({"end": "end must be after start"})
        return data


# ---------------------------------------------------------------------------------------------
# Documentation of the answer (OpenAPI); never used to render it.


class SaturationSeriesGpu(serializers.Serializer):
    """One chosen GPU's line: the metric's mean per time bin (null where it reported nothing)."""

    host = serializers.CharField()
    gpu = serializers.IntegerField()
    label = serializers.CharField(help_text='"nid001234:2 (rank 388)"')
    rank = serializers.IntegerField(allow_null=True)
    values = serializers.ListField(child=serializers.FloatField(allow_null=True))


class SaturationSeriesPeers(serializers.Serializer):
    """The first chosen GPU's peers (as the straggler detector picks them, idle and chosen GPUs left out):
    median and 10th / 90th percentile per time bin, null where fewer than 4 peers reported."""

    description = serializers.CharField()
    count = serializers.IntegerField(min_value=0)
    median = serializers.ListField(child=serializers.FloatField(allow_null=True))
    p10 = serializers.ListField(child=serializers.FloatField(allow_null=True))
    p90 = serializers.ListField(child=serializers.FloatField(allow_null=True))


class SaturationSeriesResponse(serializers.Serializer):
    """Per-GPU series of one metric for the chosen GPUs, against their peers' median and 10-90 % band.

    ``times[i]`` starts bin ``i`` (``bin_seconds`` long, UTC); every list has one entry per bin. Values are
    in ``unit`` (a 0-1 fraction when empty)."""

    metric = serializers.CharField()
    title = serializers.CharField()
    unit = serializers.CharField(allow_blank=True)
    bin_seconds = serializers.FloatField()
    steady_start = serializers.DateTimeField(allow_null=True, help_text="Where the steady state begins (warm-up before).")
    times = serializers.ListField(child=serializers.CharField(), help_text='ISO 8601 UTC, e.g. "2025-05-01T12:00:00Z".')
    gpus = SaturationSeriesGpu(many=True)
    peers = SaturationSeriesPeers()


# ---------------------------------------------------------------------------------------------


class SeriesView(ConditionalProductMixin, APIView):
    """One metric over time for up to 16 GPUs of the job, with the first GPU's peers' median and 10-90 % band
    (the straggler against the GPUs it should look like), from the job's saturation product."""

    authentication_classes = JOB_API_AUTHENTICATION
    product_params_class = SaturationSeriesParams

    def product_version(self, request, cluster, job_id):
        self.head = saturation_head(request, cluster, job_id)
        return saturation_version(self.head)

    @extend_schema(parameters=[SaturationSeriesParams], responses={200: SaturationSeriesResponse})
    def get(self, request, cluster, job_id):
        return self.product_get(request, cluster=cluster, job_id=job_id)

    def product_payload(self, request, params, cluster, job_id):
        record = JobSaturation.objects.only("id", "product", "per_gpu", "stragglers", "steady_start").get(pk=self.head["id"])
        per_gpu = record.per_gpu
        row_of = {(gpu["host"], gpu["gpu"]): row for row, gpu in enumerate(per_gpu)}
        chosen = _chosen_rows(params.get("gpus"), row_of, record.stragglers, per_gpu)
        metric = params["metric"]
        cube = load_product(record, [metric, "busy"] if metric != "busy" else [metric])
        if len(cube.hosts) != len(per_gpu):
            raise InputError("this job's product and its GPU table disagree; they are rebuilt at the job's next scoring", status_code=404)
        series = gpu_series(cube.values[metric], cube.bin_starts, cube.bin_seconds, per_gpu, chosen,
                            busy=cube.values.get("busy"), steady=cube.steady_columns(), bins=params["bins"],
                            start=_naive_utc(params.get("start")), end=_naive_utc(params.get("end")))
        described = METRICS[metric]
        return {
            "metric": metric, "title": described.title, "unit": described.unit, "bin_seconds": series.bin_seconds,
            "steady_start": record.steady_start,
            "times": [str(np.datetime_as_string(t, unit="s")) + "Z" for t in series.times],
            "gpus": [{"host": per_gpu[row]["host"], "gpu": per_gpu[row]["gpu"], "label": gpu_label(per_gpu[row]),
                      "rank": per_gpu[row].get("rank"), "values": rounded(line, described.scale)}
                     for row, line in zip(chosen, series.values)],
            "peers": {"description": series.description, "count": series.peers,
                      "median": rounded(series.median, described.scale), "p10": rounded(series.p10, described.scale),
                      "p90": rounded(series.p90, described.scale)},
        }


def _chosen_rows(asked, row_of: dict, stragglers: list, per_gpu: list) -> list[int]:
    """Rows of the GPUs asked for (400 naming any that is not the job's), in the order asked, each once; without
    ``gpus``: the first GPU-level straggler, else the first GPU of the first node finding, else the lowest rank."""
    if asked:
        unknown = [f"{host}:{gpu}" for host, gpu in asked if (host, gpu) not in row_of]
        if unknown:
            raise serializers.ValidationError({"gpus": [f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                                                        f"{'a GPU' if len(unknown) == 1 else 'GPUs'} of this job"]})
        return list(dict.fromkeys(row_of[pair] for pair in asked))
    for finding in stragglers or []:
        if finding.get("level") == "gpu" and (finding.get("host"), finding.get("gpu")) in row_of:
            return [row_of[(finding["host"], finding["gpu"])]]
    for finding in stragglers or []:
        if finding.get("level") == "node":
            rows = [row for (host, _), row in row_of.items() if host == finding.get("host")]
            if rows:
                return [min(rows)]
    if not per_gpu:
        raise InputError("this job's saturation result has no GPUs", status_code=404)
    return [min(range(len(per_gpu)), key=lambda row: (per_gpu[row].get("rank") is None, per_gpu[row].get("rank") or 0, row))]


def _naive_utc(moment):
    """An aware datetime as numpy's naive UTC (the product's times are UTC)."""
    if moment is None:
        return None
    return np.datetime64(moment.astimezone(dt_timezone.utc).replace(tzinfo=None), "ns")
