"""Parameters and bodies of the application-metrics API, validated here so the schema documents them."""
from rest_framework import serializers

from apps.core.api.heatmaps import HeatmapTimeField
from apps.core.api.params import CommaListField, JobRefField, QueryIntegerField

from ..services import NAME

FORMATS = ("json", "megatron-log", "tensorboard")
MAX_COMPARE = 12


class MetricsPostParams(serializers.Serializer):
    format = serializers.ChoiceField(choices=FORMATS, required=False, default="json",
                                     help_text="json: {\"rows\": [...]} or a list of rows; megatron-log: the job's output as "
                                               "text/plain; tensorboard: one event file as application/octet-stream")


class MetricsGetParams(serializers.Serializer):
    names = CommaListField(child=serializers.RegexField(NAME.pattern, max_length=64), required=False, max_length=64,
                           help_text="series to return (default: all)")
    # core's bounded time (1970-2200, no zone = UTC): a year 166 would overflow the store's nanoseconds (a 500)
    since = HeatmapTimeField(help_text="ISO 8601; default: the job's first row")
    until = HeatmapTimeField(help_text="ISO 8601; default: the job's last row")
    max_points = QueryIntegerField(min_value=10, max_value=20_000, required=False, default=2_000,
                                   help_text="per series; longer series are thinned evenly (markers are always kept)")

    def validate(self, attrs):
        if attrs.get("since") and attrs.get("until") and attrs["until"] <= attrs["since"]:
            raise serializers.ValidationError({"until": ["must be after since"]})
        return attrs


class ModelConfigSerializer(serializers.Serializer):
    params = serializers.IntegerField(min_value=1, max_value=10**15, required=False, allow_null=True)
    layers = serializers.IntegerField(min_value=1, max_value=10_000)
    hidden = serializers.IntegerField(min_value=1, max_value=1_000_000)
    ffn_hidden = serializers.IntegerField(min_value=1, max_value=10_000_000, required=False, allow_null=True)
    heads = serializers.IntegerField(min_value=1, max_value=100_000)
    kv_heads = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True)
    seq_len = serializers.IntegerField(min_value=1, max_value=100_000_000)
    vocab = serializers.IntegerField(min_value=1, max_value=100_000_000)
    global_batch = serializers.IntegerField(min_value=1, max_value=100_000_000, required=False, allow_null=True)
    swiglu = serializers.BooleanField(required=False, default=False)
    moe_experts = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True)
    moe_topk = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True)
    moe_ffn_hidden = serializers.IntegerField(min_value=1, max_value=10_000_000, required=False, allow_null=True)
    gpu_peak_tflops = serializers.FloatField(min_value=0.001, max_value=1e6, required=False, allow_null=True)

    def validate(self, attrs):
        if attrs.get("kv_heads") and attrs["heads"] % attrs["kv_heads"]:
            raise serializers.ValidationError({"kv_heads": [f"{attrs['heads']} heads do not split into {attrs['kv_heads']} groups"]})
        if attrs["hidden"] % attrs["heads"]:
            raise serializers.ValidationError({"heads": [f"hidden {attrs['hidden']} is not a multiple of {attrs['heads']} heads"]})
        if bool(attrs.get("moe_experts")) != bool(attrs.get("moe_topk")):
            raise serializers.ValidationError({"moe_topk": ["give moe_experts and moe_topk together"]})
        if attrs.get("moe_topk") and attrs["moe_topk"] > attrs["moe_experts"]:
            raise serializers.ValidationError({"moe_topk": [f"top-{attrs['moe_topk']} of {attrs['moe_experts']} experts"]})
        return attrs


class CompareParams(serializers.Serializer):
    jobs = CommaListField(child=JobRefField(), min_length=1, max_length=MAX_COMPARE,
                          help_text=f"cluster/job_id, comma separated, 1 to {MAX_COMPARE} jobs")
