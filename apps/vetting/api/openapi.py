"""Documentation-only response serializers of the vetting API (OpenAPI schema, issue 16 item 13).

Some views build their bodies by hand; these classes describe those bodies so that clients and
fuzzers can check every answer. They are never used to render a response."""
from rest_framework import serializers

from .serializers import NodeHealthEventSerializer, NodeHealthSerializer


class VettingRunStoredResponse(serializers.Serializer):
    """The run that was stored: its id, the hosts it covered and failed, and what the parser noticed."""

    run = serializers.IntegerField()
    source = serializers.CharField()
    hosts = serializers.ListField(child=serializers.CharField())
    failed_hosts = serializers.ListField(child=serializers.CharField())
    results = serializers.IntegerField(min_value=0)
    failed_results = serializers.IntegerField(min_value=0)
    warnings = serializers.ListField(child=serializers.CharField())
    url = serializers.CharField(help_text="The run's page.")


class VettingNodeResponse(NodeHealthSerializer):
    """A node's health state with its last 200 events, newest first."""

    events = NodeHealthEventSerializer(many=True)

    class Meta(NodeHealthSerializer.Meta):
        fields = [*NodeHealthSerializer.Meta.fields, "events"]


class VettingNodeActionResponse(NodeHealthSerializer):
    """The node's health state after the action, and the event the action recorded (with the command it ran)."""

    event = NodeHealthEventSerializer()

    class Meta(NodeHealthSerializer.Meta):
        fields = [*NodeHealthSerializer.Meta.fields, "event"]


class ProtocolFinding(serializers.Serializer):
    """A problem or remark about the protocol, where it is and what to do."""

    severity = serializers.CharField(help_text="error, warning or info.")
    line = serializers.IntegerField(min_value=1)
    column = serializers.IntegerField(min_value=1)
    path = serializers.CharField(allow_blank=True, help_text="e.g. evals[2].type; empty for the whole document.")
    message = serializers.CharField()
    hint = serializers.CharField(allow_blank=True)


class ProtocolEval(serializers.Serializer):
    """An evaluation as vetnode will run it; its parameters (thresholds, rates) follow as further keys."""

    name = serializers.JSONField(help_text="The name as written (text; anything else is reported as a finding).")
    type = serializers.CharField(help_text="The evaluation type's short name.")


class ProtocolValidateResponse(serializers.Serializer):
    """The check of a vetnode protocol: every finding, and the evaluations with their thresholds."""

    valid = serializers.BooleanField()
    name = serializers.CharField(allow_blank=True)
    sha256 = serializers.CharField()
    findings = ProtocolFinding(many=True)
    evals = ProtocolEval(many=True)
