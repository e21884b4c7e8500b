"""Parameters of the storage API, validated here so the schema documents them."""
from rest_framework import serializers

from apps.core.api.heatmaps import HeatmapTimeField
from apps.core.api.params import QueryIntegerField


class StorageParams(serializers.Serializer):
    step = QueryIntegerField(min_value=10, max_value=86_400, required=False,
                             help_text="seconds per bucket (default: the finest of 10 s … 1 day giving at most 1,500 buckets)")
    # core's bounded time (1970-2200, no zone = UTC): a year 166 would overflow the store's nanoseconds
    since = HeatmapTimeField(help_text="ISO 8601; default: the job's first reading")
    until = HeatmapTimeField(help_text="ISO 8601; default: the job's last reading")

    def validate(self, attrs):
        if attrs.get("since") and attrs.get("until") and attrs["until"] <= attrs["since"]:
            raise serializers.ValidationError({"until": ["must be after since"]})
        if attrs.get("since") and attrs.get("until") and attrs.get("step"):
            buckets = (attrs["until"] - attrs["since"]).total_seconds() / attrs["step"]
            if buckets > 20_000:
                raise serializers.ValidationError({"step": [f"{buckets:,.0f} buckets; at most 20,000: a larger step"]})
        return attrs
