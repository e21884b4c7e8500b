"""Response shape of the storage API, for drf-spectacular (documentation only)."""
from rest_framework import serializers


def _floats(help_text: str) -> serializers.ListField:
    return serializers.ListField(child=serializers.FloatField(allow_null=True), help_text=help_text)


class StorageCoverage(serializers.Serializer):
    first = serializers.DateTimeField()
    last = serializers.DateTimeField()
    readings = serializers.IntegerField(help_text="job_stats readings imported for the job")


class StorageSeries(serializers.Serializer):
    time = serializers.ListField(child=serializers.DateTimeField(), help_text="bucket starts (UTC)")
    read_bytes = _floats("bytes/s read, summed over the OSTs (and MDTs with data on MDT)")
    write_bytes = _floats("bytes/s written")
    read_ops = _floats("read RPCs/s")
    write_ops = _floats("write RPCs/s")
    metadata_ops = _floats("metadata operations/s on the MDTs (open, close, getattr, mkdir, ...)")


class StorageBurst(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    write_bytes = serializers.FloatField()
    peak_rate = serializers.FloatField(help_text="bytes/s")
    gpu_idle_s = serializers.FloatField(allow_null=True, help_text="seconds the GPUs idled around it; null: no GPU telemetry")


class StorageResponse(serializers.Serializer):
    job = serializers.CharField()
    step = serializers.IntegerField(allow_null=True, help_text="seconds per bucket, as used")
    step_note = serializers.CharField(help_text="why the step is larger than asked (at most 20,000 buckets whatever "
                                                "the readings' span); empty when it is not")
    coverage = StorageCoverage(allow_null=True)
    series = StorageSeries()
    totals = serializers.DictField(child=serializers.FloatField(), help_text="bytes and operations over the readings")
    targets = serializers.ListField(child=serializers.CharField())
    bursts = StorageBurst(many=True)
    verdict = serializers.CharField()
    reason = serializers.CharField(required=False)
