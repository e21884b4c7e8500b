from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Nic, Node

MAX_DISCOVERY_RECORDS = 5000
MAX_PLACEMENT_NODES = 20000


class NicSerializer(serializers.ModelSerializer):
    group = serializers.IntegerField(source="switch.group.number")
    switch = serializers.IntegerField(source="switch.index")

    class Meta:
        model = Nic
        fields = ["name", "index", "mac", "group", "switch", "port"]


class NodeSerializer(serializers.ModelSerializer):
    group = serializers.IntegerField(source="group.number")
    nics = NicSerializer(many=True)
    gpus = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = ["hostname", "xname", "group", "cabinet", "state", "gpu_model", "gpus", "nics"]

    def get_gpus(self, node) -> list[dict]:
        """GPU i shares a NUMA domain with NIC i (hsn i) on GH200 nodes."""
        nic_names = {nic.index: nic.name for nic in node.nics.all()}
        return [{"index": index, "nic": nic_names.get(index)} for index in range(node.gpus)]


class SummarySerializer(serializers.Serializer):
    groups = serializers.IntegerField()
    switches = serializers.IntegerField()
    nodes = serializers.IntegerField()
    nics = serializers.IntegerField()
    gpus = serializers.IntegerField()
    name = serializers.CharField()
    revision = serializers.IntegerField(allow_null=True)


@extend_schema_field({"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
                      "example": "nid[000001-000128]"})
class NodeSetField(serializers.Field):
    """A list of hostnames, or one Slurm hostlist expression such as ``nid[000001-000128]``."""

    default_error_messages = {
        "invalid": "expected a list of hostnames or a hostlist expression like nid[000001-000128]",
        "hostlist": "{expression!r} is not a valid hostlist expression: {reason}",
        "empty": "the node set is empty",
        "too_many": "at most {limit} nodes per request, got {count}",
    }

    def to_internal_value(self, data):
        from apps.core import hostlists

        if isinstance(data, str):
            try:
                names = list(dict.fromkeys(hostlists.expand(data)))  # Slurm's grammar; a set keeps each name once
            except hostlists.HostlistError as exc:
                self.fail("hostlist", expression=data[:200], reason=str(exc))
        elif isinstance(data, list) and all(isinstance(item, str) for item in data):
            names = [item.strip() for item in data]
        else:
            self.fail("invalid")
        if not names:
            self.fail("empty")
        if len(names) > MAX_PLACEMENT_NODES:
            self.fail("too_many", limit=MAX_PLACEMENT_NODES, count=len(names))
        return names

    def to_representation(self, value):
        return value


class PlacementRequestSerializer(serializers.Serializer):
    nodes = NodeSetField(help_text="Hostnames, or a hostlist expression such as nid[000001-000128].")


class DiscoveredNicSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=20, help_text="Interface name, e.g. hsn0.")
    mac = serializers.CharField(max_length=40, help_text="Its MAC address, e.g. 02:00:00:00:07:ea.")


class DiscoveryRecordSerializer(serializers.Serializer):
    hostname = serializers.CharField(max_length=64)
    xname = serializers.CharField(max_length=40, required=False, allow_blank=True, allow_null=True)
    gpus = serializers.IntegerField(required=False, min_value=0, max_value=16, allow_null=True)
    gpu_model = serializers.CharField(max_length=40, required=False, allow_blank=True)
    nics = DiscoveredNicSerializer(many=True, allow_empty=False)


class DiscoveryBatchSerializer(serializers.Serializer):
    records = DiscoveryRecordSerializer(many=True, allow_empty=False, max_length=MAX_DISCOVERY_RECORDS)
