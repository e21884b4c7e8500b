"""Documentation-only response serializers of the jobs API (OpenAPI schema, issue 16 item 13).

The views build these bodies by hand; these classes describe them so that clients and fuzzers can
check every answer. They are never used to render a response."""
from rest_framework import serializers


class JobTokenResponse(serializers.Serializer):
    """A new job token, shown once, with the header that uses it."""

    job_token = serializers.CharField()
    cluster = serializers.CharField()
    job_id = serializers.IntegerField()
    header = serializers.CharField(help_text="Authorization: JobToken <key>")


class JobEventResponse(serializers.Serializer):
    """The job after the event; ``job_token`` only for a start event that asked for one (shown once)."""

    cluster = serializers.CharField()
    job_id = serializers.IntegerField()
    state = serializers.CharField(help_text="The job's Slurm state after the event.")
    url = serializers.CharField(help_text="The job's page.")
    job_token = serializers.CharField(required=False)
