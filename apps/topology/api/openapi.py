"""Documentation-only response serializers of the topology API (OpenAPI schema, issue 16 item 13).

The views build their bodies by hand; these classes only describe those bodies so that clients and
fuzzers can check every answer. They are never used to render a response."""
from rest_framework import serializers

from ..placement import HOP_CLASSES

PlacementHopClasses = type("PlacementHopClasses", (serializers.Serializer,), {
    "__module__": __name__,
    "__doc__": "NIC pairs of the node set by hop class (every class is always present, 0 when none).",
    **{name: serializers.IntegerField(min_value=0) for name in HOP_CLASSES},
})


class PlacementPairs(serializers.Serializer):
    """Every unordered pair of the nodes, NIC lane by NIC lane (GPU i talks over NIC i)."""

    pairs = serializers.IntegerField(min_value=0, help_text="Node pairs: n(n-1)/2.")
    nic_pairs = serializers.IntegerField(min_value=0, help_text="NIC pairs on the same lane, over all lanes.")
    by_class = PlacementHopClasses()
    mean_hops = serializers.FloatField(allow_null=True, help_text="Mean inter-switch hops over the NIC pairs; null without any.")


class PlacementResponse(serializers.Serializer):
    """Placement metrics of a node set: how many nodes, NICs, switches, groups and cabinets it spans, how
    fragmented it is, how many nodes sit in each dragonfly group and how its NIC pairs are connected."""

    nodes = serializers.IntegerField(min_value=0)
    nics = serializers.IntegerField(min_value=0)
    switches = serializers.IntegerField(min_value=0)
    groups = serializers.IntegerField(min_value=0)
    cabinets = serializers.IntegerField(min_value=0)
    group_fragmentation = serializers.FloatField(
        allow_null=True, help_text="Groups used / the fewest groups that could hold the nodes (1 is compact); null when unknown.")
    switch_fragmentation = serializers.FloatField(
        allow_null=True, help_text="Switches used / the fewest switches that could hold the NICs; null when unknown.")
    nodes_per_group = serializers.DictField(
        child=serializers.IntegerField(min_value=1), help_text="Dragonfly group number (as text) → nodes of the set in it.")
    pairs = PlacementPairs()


class DiscoveryResponse(serializers.Serializer):
    """What storing the discovery record(s) changed."""

    nodes = serializers.IntegerField(min_value=0, help_text="Nodes in the record(s).")
    changed = serializers.BooleanField(help_text="Whether the stored topology changed.")
    summary = serializers.ListField(child=serializers.CharField(), help_text="The changes, one line per kind of object.")
    revision = serializers.IntegerField(allow_null=True, help_text="The topology revision now current; null when none.")
