"""Query parameters of the network endpoints, every one bounded."""
from rest_framework import serializers

from apps.core.api.heatmaps import HeatmapOptions, HeatmapTimeField
from apps.core.api.params import QueryIntegerField

from ..selectors import METRICS, SORTS


class NetworkParams(serializers.Serializer):
    start = HeatmapTimeField(help_text="ISO 8601: only buckets from this time on (UTC when no zone)")
    end = HeatmapTimeField(help_text="ISO 8601: only buckets before this time")
    series = serializers.ChoiceField(choices=["all", "none"], required=False, default="all",
                                     error_messages={"invalid_choice": "choose all or none"},
                                     help_text="none: totals and findings only (what a live page polls)")

    def validate(self, attrs):
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError({"end": "end must be after start"})
        return attrs


class NetworkHeatmapParams(HeatmapOptions):
    metric = serializers.ChoiceField(choices=list(METRICS), required=False, default="traffic",
                                     error_messages={"invalid_choice": f"choose one of {', '.join(METRICS)}"},
                                     help_text="traffic (in + out), tx, rx (GB/s) or retries (% of packets sent)")
    sort = serializers.ChoiceField(choices=list(SORTS), required=False, default="node",
                                   error_messages={"invalid_choice": f"choose one of {', '.join(SORTS)}"},
                                   help_text="row order, as the GPU heatmaps: NIC k of a node where its GPU k is")
    bins = QueryIntegerField(min_value=1, max_value=2000, default=300,
                             error_messages={"min_value": "bins is a whole number from 1 to 2000",
                                             "max_value": "bins is a whole number from 1 to 2000"})
    encoding = serializers.ChoiceField(choices=["u8"], required=False, default="u8",
                                       error_messages={"invalid_choice": "the only encoding is u8"})
