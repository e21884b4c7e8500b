"""GET /api/v1/system/versions/?partition=: the fleet's version map, a partition's expected set and minorities."""
import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError

from ..version_map import fleet_versions

PARTITION = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class SystemVersionsResponse(serializers.Serializer):
    """The version map (values with node counts per partition and per dragonfly group), the drift (nodes that
    started showing a value, per day), and for one partition its expected set (the majority per key: what the
    pre-flight checks) and the nodes that differ."""

    partition = serializers.CharField(allow_null=True)
    nodes = serializers.IntegerField()
    expected = serializers.DictField(help_text="{key: {value, nodes, of}}")
    minorities = serializers.ListField(child=serializers.DictField())
    by_partition = serializers.DictField(help_text="{partition: {key: [[value, nodes], ...]}}")
    by_group = serializers.DictField(help_text="{group: {key: [[value, nodes], ...]}}")
    drift = serializers.ListField(child=serializers.DictField(), help_text="[{day, key, label, value, nodes}]")
    keys = serializers.DictField(help_text="{key: label}")


class SystemVersionsView(APIView):
    """The fleet's versions by partition and dragonfly group, with their drift; with ``partition``, that partition's
    expected set and minority nodes. Everyone signed in (and the prolog's service token) may read it."""

    @extend_schema(parameters=[OpenApiParameter("partition", str, required=False,
                                                description="A Slurm partition: its expected set and minorities")],
                   responses={200: SystemVersionsResponse})
    def get(self, request):
        partition = request.query_params.get("partition", "")
        if partition and not PARTITION.match(partition):
            raise InputError(f"partition {partition[:80]!r} is not a Slurm partition name",
                             [ErrorItem(message="letters, digits, '.', '_', '-'; at most 64", field="partition")])
        return Response(fleet_versions(partition or None))
