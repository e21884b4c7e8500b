"""GET /api/v1/nodes/<host>/versions/: a node's versions now and over time (facts, apps/telemetry/versions.py)."""
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError

from ..ingest import HOSTNAME
from ..selectors import node_version_history, versions_current


class VersionFactSerializer(serializers.Serializer):
    key = serializers.CharField()
    gpu = serializers.IntegerField(allow_null=True, help_text="null for the node's own versions (driver, NCCL, ...).")
    value = serializers.CharField()
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    partition = serializers.CharField(allow_blank=True)
    source = serializers.CharField(allow_blank=True)


class NodeVersionsResponse(serializers.Serializer):
    """The node's current versions (per key and GPU the value seen last) and every fact, newest first per key."""

    host = serializers.CharField()
    partition = serializers.CharField(allow_blank=True)
    current = VersionFactSerializer(many=True)
    history = VersionFactSerializer(many=True)


def _fact(row: dict) -> dict:
    return {"key": row["key"], "gpu": None if row["gpu"] < 0 else row["gpu"], "value": row["value"],
            "first_seen": row["first_seen"], "last_seen": row["last_seen"], "partition": row["partition"],
            "source": row["source"]}


class NodeVersionsView(APIView):
    """A node's driver, firmware and communication-stack versions with when each was first and last seen. Everyone
    signed in may read them (a fact about the machine); 404 when nothing is known of the node."""

    @extend_schema(responses={200: NodeVersionsResponse})
    def get(self, request, host):
        if not HOSTNAME.match(host) or len(host) > 64:
            raise InputError(f"{host[:80]!r} is not a host name", [ErrorItem(message="letters, digits, '.', '_', '-'", field="host")])
        history = node_version_history(host)
        if not history:
            raise InputError(f"no versions are known for {host}", status_code=404)
        current = versions_current([host])
        partition = max(history, key=lambda row: row["last_seen"])["partition"]
        return Response(NodeVersionsResponse({"host": host, "partition": partition, "current": [_fact(r) for r in current],
                                              "history": [_fact(r) for r in history]}).data)
