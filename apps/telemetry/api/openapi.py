"""Documentation-only response serializers of the telemetry API (OpenAPI schema, issue 16 item 13).

The views build these bodies by hand; these classes describe them so that clients and fuzzers can
check every answer. They are never used to render a response."""
from rest_framework import serializers


class IngestProblem(serializers.Serializer):
    """A sample or line that was not stored, and why. Posted samples name ``row`` (0-based), ``line`` (NDJSON)
    and ``field``; imported text names ``line`` and ``column`` (the field tag or metric, when known)."""

    row = serializers.IntegerField(required=False, min_value=0)
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(required=False, allow_null=True)
    column = serializers.CharField(required=False, allow_null=True)
    message = serializers.CharField()


class IngestResponse(serializers.Serializer):
    """How many samples were stored and rejected, the batch that records it, and the first problems."""

    accepted = serializers.IntegerField(min_value=0)
    rejected = serializers.IntegerField(min_value=0)
    batch = serializers.IntegerField(help_text="The ingest batch's id.")
    errors = IngestProblem(many=True)
    errors_truncated = serializers.BooleanField(help_text="Whether there were more problems than listed.")


class SeriesResponse(serializers.Serializer):
    """Samples (``step`` null: ts, cluster, host, gpu, field, value ...) or bucket statistics (``step`` seconds:
    bucket, host, gpu, field, count and the asked stats), as ``columns`` and ``rows`` of values in that order."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step = serializers.IntegerField(allow_null=True)
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.ListField(child=serializers.JSONField()),
                                 help_text="One list per sample or bucket; times as ISO 8601 UTC, numbers or null, text.")
    truncated = serializers.BooleanField(help_text="Whether more rows matched than the limit sends.")
