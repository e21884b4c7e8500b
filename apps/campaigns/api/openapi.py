"""Response shapes of the campaigns API, for drf-spectacular (documentation only)."""
from rest_framework import serializers

from ..goodput import PARTS


class BadputParts(serializers.Serializer):
    """GPU-hours by badput part (the words of each: ``words.badput``)."""

    locals().update({part: serializers.FloatField() for part in PARTS})


class CampaignJobRow(serializers.Serializer):
    job = serializers.CharField(help_text="cluster/job_id")
    url = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    state = serializers.CharField()
    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    gpus = serializers.IntegerField(allow_null=True)
    nodes = serializers.IntegerField(allow_null=True)
    hours = serializers.FloatField()
    allocated_gpu_hours = serializers.FloatField()
    productive_gpu_hours = serializers.FloatField()
    goodput = serializers.FloatField(allow_null=True)
    badput = BadputParts()
    queue_hours_before = serializers.FloatField(allow_null=True, help_text="the gap since the previous allocation ended")
    resumed_from = serializers.IntegerField(allow_null=True)
    first_step = serializers.IntegerField(allow_null=True)
    last_step = serializers.IntegerField(allow_null=True)
    kept_step = serializers.IntegerField(allow_null=True)
    last_checkpoint = serializers.IntegerField(allow_null=True)
    failure = serializers.CharField(allow_null=True)


class CampaignFailure(serializers.Serializer):
    job = serializers.CharField(help_text="cluster/job_id")
    url = serializers.CharField()
    end = serializers.DateTimeField(allow_null=True)
    cause = serializers.CharField(help_text="node failure, GPU XID error, out of memory, NCCL timeout, hang, time limit "
                                            "without a final checkpoint, cancelled, preempted, application error")
    cause_kind = serializers.CharField()
    evidence = serializers.CharField()
    lost_gpu_hours = serializers.FloatField()
    nodes = serializers.ListField(child=serializers.CharField())
    bad_nodes = serializers.ListField(child=serializers.CharField())
    node_links = serializers.DictField(child=serializers.CharField(), help_text="host -> its vetting page")


class CampaignCheckpoint(serializers.Serializer):
    interval_s = serializers.FloatField(allow_null=True, help_text="median time between checkpoint starts")
    cost_s = serializers.FloatField(allow_null=True, help_text="median time a save held training")
    young_s = serializers.FloatField(allow_null=True, help_text="sqrt(2 C MTBF)")
    young_daly_s = serializers.FloatField(allow_null=True, help_text="Daly's first-order optimum; null without an MTBF")
    worth_share = serializers.FloatField(allow_null=True)
    words = serializers.CharField()


class CampaignListItem(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    source = serializers.CharField()
    cluster = serializers.CharField()
    account = serializers.CharField(allow_blank=True)
    user = serializers.CharField()
    jobs = serializers.IntegerField()
    url = serializers.CharField()
    api_url = serializers.CharField()


class CampaignDetail(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    key = serializers.CharField()
    source = serializers.CharField()
    cluster = serializers.CharField()
    account = serializers.CharField(allow_blank=True)
    user = serializers.CharField()
    edited = serializers.BooleanField()
    url = serializers.CharField()
    goodput = serializers.FloatField(allow_null=True, help_text="productive over allocated GPU-hours, 0-1")
    allocated_gpu_hours = serializers.FloatField()
    productive_gpu_hours = serializers.FloatField()
    badput = BadputParts()
    queue_hours = serializers.FloatField(help_text="time between allocations, not badput")
    jobs = CampaignJobRow(many=True)
    failures = CampaignFailure(many=True)
    older_restarts = serializers.ListField(child=serializers.DictField())
    mtbf_hours = serializers.FloatField(allow_null=True, help_text="null: no failure, unknown")
    mtbf_hours_per_1000_nodes = serializers.FloatField(allow_null=True)
    mtbf_words = serializers.CharField()
    checkpoint = CampaignCheckpoint()
    words = serializers.DictField()
    figures = serializers.DictField(help_text="Plotly figures: curves, goodput")
    computed = serializers.DateTimeField()
