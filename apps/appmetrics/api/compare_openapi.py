"""Response shape of GET /api/v1/jobs/compare/, for drf-spectacular (documentation only)."""
from rest_framework import serializers

from .serializers import ModelConfigSerializer


class CompareLayout(serializers.Serializer):
    tp = serializers.IntegerField()
    pp = serializers.IntegerField()
    dp = serializers.IntegerField()
    cp = serializers.IntegerField()
    ep = serializers.IntegerField()
    vpp = serializers.IntegerField(allow_null=True)
    world_size = serializers.IntegerField()
    source = serializers.CharField()


class ComparePlacement(serializers.Serializer):
    nodes = serializers.IntegerField()
    groups = serializers.IntegerField(help_text="dragonfly groups the job's nodes span")
    switches = serializers.IntegerField(help_text="switches the job's NICs attach to")
    group_fragmentation = serializers.FloatField(
        allow_null=True, help_text="groups used / fewest groups that could hold the nodes (1 = compact)")
    nodes_per_group = serializers.DictField(child=serializers.IntegerField())


class CompareSaturation(serializers.Serializer):
    status = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="saturation S, 0-100")
    limiter = serializers.CharField(allow_null=True)
    stragglers = serializers.IntegerField(help_text="GPUs the straggler detector flagged")


class CompareJob(serializers.Serializer):
    ref = serializers.CharField(help_text="cluster/job_id")
    cluster = serializers.CharField()
    job_id = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    user = serializers.CharField()
    account = serializers.CharField(allow_blank=True)
    state = serializers.CharField()
    link = serializers.CharField(help_text="the job's page")
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    gpus = serializers.IntegerField(allow_null=True)
    nodes = serializers.IntegerField(allow_null=True)
    gpu_model = serializers.CharField(allow_null=True)
    model = ModelConfigSerializer(allow_null=True)
    layout = CompareLayout(allow_null=True)
    placement = ComparePlacement(allow_null=True)
    tokens_per_s = serializers.FloatField(allow_null=True)
    tokens_per_s_per_gpu = serializers.FloatField(allow_null=True)
    mfu = serializers.FloatField(allow_null=True, help_text="model FLOPs utilisation, 0-1")
    energy_per_token_j = serializers.FloatField(allow_null=True)
    tensor_active = serializers.FloatField(allow_null=True)
    saturation = CompareSaturation(allow_null=True)
    missing = serializers.ListField(child=serializers.CharField(), help_text="why a number is absent")


class CompareRow(serializers.Serializer):
    key = serializers.CharField(help_text="dotted path into each job: model.layers, placement.groups, ...")
    label = serializers.CharField()
    section = serializers.CharField()
    format = serializers.ChoiceField(choices=["text", "int", "float", "percent", "score", "joule"])
    values = serializers.ListField(child=serializers.JSONField(allow_null=True), help_text="one per job, in the jobs' order")
    differs = serializers.BooleanField(help_text="the jobs do not all have the same value (measured numbers within 1 %)")


class ScalingRun(serializers.Serializer):
    job = serializers.CharField()
    gpus = serializers.IntegerField()
    tokens_per_s = serializers.FloatField()
    global_batch = serializers.IntegerField(allow_null=True)
    tokens_per_s_per_gpu = serializers.FloatField()
    speedup = serializers.FloatField(help_text="tokens/s over the smallest run's")
    ideal_speedup = serializers.FloatField(help_text="GPUs over the smallest run's GPUs")
    efficiency = serializers.FloatField(help_text="tokens/s per GPU over the smallest run's (1 = perfect scaling)")
    kind = serializers.ChoiceField(choices=["baseline", "strong", "weak"], allow_null=True,
                                   help_text="baseline: the smallest run; strong: the same global batch as it; weak: another "
                                             "global batch; null: a global batch unknown")


class Scaling(serializers.Serializer):
    runs = ScalingRun(many=True)
    model = serializers.DictField(allow_null=True, help_text="the model shape the runs share")
    note = serializers.CharField()
    left_out = serializers.ListField(child=serializers.CharField())


class CompareResponse(serializers.Serializer):
    jobs = CompareJob(many=True)
    verdict = serializers.CharField(help_text="which job is most efficient and by how much, in words")
    same_model = serializers.BooleanField()
    rows = CompareRow(many=True)
    scaling = Scaling()
