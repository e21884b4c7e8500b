"""Response shapes of the application-metrics API, for drf-spectacular (documentation only)."""
from rest_framework import serializers

from ..events import KINDS
from .serializers import ModelConfigSerializer


class SeriesBody(serializers.Serializer):
    ts = serializers.ListField(child=serializers.DateTimeField())
    step = serializers.ListField(child=serializers.IntegerField(allow_null=True))
    value = serializers.ListField(child=serializers.FloatField())
    points = serializers.IntegerField(help_text="points stored in the window (before thinning)")


class MetricsCoverage(serializers.Serializer):
    first = serializers.DateTimeField(allow_null=True)
    last = serializers.DateTimeField(allow_null=True)
    rows = serializers.IntegerField()
    names = serializers.ListField(child=serializers.CharField())


class MetricsResponse(serializers.Serializer):
    job = serializers.CharField()
    series = serializers.DictField(child=SeriesBody())
    coverage = MetricsCoverage()


class LineErrorBody(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


class MetricsIngestResponse(serializers.Serializer):
    job = serializers.CharField()
    format = serializers.CharField()
    rows = serializers.IntegerField(help_text="values stored")
    lines = serializers.IntegerField(required=False)
    model_config = serializers.BooleanField(required=False, help_text="the argument dump set the model config")
    run = serializers.CharField(required=False, help_text="the training run the body named (the job's campaign)")
    errors = LineErrorBody(many=True)


class ModelResponse(ModelConfigSerializer):
    source = serializers.CharField()
    updated = serializers.DateTimeField()
    model_flops_per_token = serializers.FloatField(allow_null=True)
    formula = serializers.CharField(allow_null=True)


class EventBody(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(allow_null=True)
    kind = serializers.ChoiceField(choices=list(KINDS), help_text="host: the GPUs waited on their data loaders")
    reason = serializers.CharField()
    dip = serializers.FloatField(help_text="fraction of the steady throughput lost (0.4: 40 % below it)")


class HostBoundBody(serializers.Serializer):
    """A host-bound job (apps/appmetrics/hostbound.py): its slow iterations with saturated data loaders and idle GPUs."""

    kind = serializers.CharField()
    sentence = serializers.CharField()
    slow_share = serializers.FloatField(help_text="share of the iterations that ran slow, checkpoints' own left out")
    loader_cpu = serializers.FloatField(help_text="the data-loader workers' CPU share then, 0-1")
    gpu_idle = serializers.FloatField(help_text="the share of the GPUs idle then, 0-1")
    limiter = serializers.CharField()
    action = serializers.CharField()
    checkpoint_iterations = serializers.IntegerField()


class EfficiencyResponse(serializers.Serializer):
    job = serializers.CharField()
    gpus = serializers.IntegerField(allow_null=True)
    tokens_per_s = serializers.FloatField(allow_null=True)
    tokens_per_s_source = serializers.CharField()
    tokens_per_s_per_gpu = serializers.FloatField(allow_null=True)
    model_flops_per_token = serializers.FloatField(allow_null=True)
    gpu_model = serializers.CharField(allow_null=True)
    gpu_peak_tflops = serializers.FloatField(allow_null=True)
    mfu = serializers.FloatField(allow_null=True, help_text="model FLOPs utilisation, 0-1")
    tensor_active = serializers.FloatField(allow_null=True, help_text="mean tensor-pipe activity (DCGM 1004), 0-1")
    gap_words = serializers.CharField(allow_blank=True)
    energy_per_token_j = serializers.FloatField(allow_null=True)
    formula = serializers.CharField(allow_null=True)
    model = serializers.DictField(allow_null=True)
    coverage = MetricsCoverage()
    events = EventBody(many=True)
    host_bound = HostBoundBody(allow_null=True, help_text="the GPUs wait on the host (data loading); null when not")
    missing = serializers.ListField(child=serializers.CharField(), help_text="why a number is absent")
