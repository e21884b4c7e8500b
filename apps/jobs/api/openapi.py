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


class FirstScreenFinding(serializers.Serializer):
    level = serializers.ChoiceField(choices=["critical", "warning", "info", "ok"])
    title = serializers.CharField()
    action = serializers.CharField(allow_blank=True)
    link = serializers.CharField(allow_null=True)
    source = serializers.CharField(allow_blank=True, help_text="The panel that found it.")


class FirstScreenFact(serializers.Serializer):
    label = serializers.CharField()
    value = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)
    level = serializers.CharField()
    link = serializers.CharField(allow_null=True, help_text="where the value leads (the job's training campaign), or null")


class JobFirstScreenResponse(serializers.Serializer):
    """What the first screen of the job's page says: its facts and findings (most urgent first), and the data
    behind them that panels offer (``versions``: the nodes' versions and the minorities; ``preflight``: which nodes
    passed the prolog's pre-flight)."""

    cluster = serializers.CharField()
    job_id = serializers.IntegerField()
    computed = serializers.DateTimeField()
    facts = FirstScreenFact(many=True)
    findings = FirstScreenFinding(many=True)
    versions = serializers.DictField(allow_null=True, help_text="{nodes, known, keys: {key: {value: nodes}}, minorities: [...]}")
    preflight = serializers.DictField(allow_null=True, help_text="{nodes, checked, passed: [...], failed: [...], not_checked}")
    retention = serializers.DictField(allow_null=True, help_text=(
        "null while every raw sample of the job is kept; else {raw_expired_on, whole (all its raw samples are gone), "
        "tier (the finest tier still holding its start: 1m, 10m or null), showing (product: the cube built from raw "
        "samples, kept; rollups: a cube built from rollups; nothing), retention (the store's tiers in words)}"))
