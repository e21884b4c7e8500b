"""Serializers of the vetting API. Results hide whose job they came from unless the caller may see it."""
from rest_framework import serializers

from ..choices import NodeHealthActionChoices
from ..models import NodeHealth, NodeHealthEvent, Recommendation, Rule, RuleVersion, VettingResult, VettingRun
from ..selectors import job_visible


class WhoseJob(serializers.ModelSerializer):
    """``job_id`` and ``user`` of a run or result, null unless the viewer (context ``viewer``) may see that job."""

    job_id = serializers.SerializerMethodField()
    user = serializers.SerializerMethodField()

    def _visible(self, item) -> bool:
        viewer = self.context.get("viewer")
        return viewer is not None and job_visible(viewer, item.user_name, item.account)

    def get_job_id(self, item) -> int | None:
        return item.job_id_number if self._visible(item) else None

    def get_user(self, item) -> str | None:
        return item.user_name or None if self._visible(item) else None


class VettingResultSerializer(WhoseJob):
    class Meta:
        model = VettingResult
        fields = ["id", "run", "time", "host", "group", "switch", "kind", "eval_name", "eval_type", "status", "outcome", "rank",
                  "local_rank", "gpu", "elapsed_s", "bandwidth_gbs", "metrics", "thresholds", "message", "job_id", "user"]


class VettingRunSerializer(WhoseJob):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = VettingRun
        fields = ["id", "cluster", "source", "protocol_name", "protocol_hash", "started", "ended", "hosts", "failed_hosts",
                  "results_total", "results_failed", "warnings", "job_id", "user", "created"]


class NodeHealthEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeHealthEvent
        fields = ["created", "from_state", "to_state", "action", "actor", "reason", "command", "executed", "dry_run", "output"]


class NodeHealthSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeHealth
        fields = ["host", "state", "severity", "reason", "since", "acknowledged_by", "acknowledged_at", "drained_by_belvedere"]


class NodeActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=NodeHealthActionChoices.choices)
    reason = serializers.CharField(max_length=400, trim_whitespace=True)


class RuleVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = RuleVersion
        fields = ["version", "snapshot", "changed_by", "comment", "created"]


class RuleSerializer(serializers.ModelSerializer):
    versions = RuleVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Rule
        fields = ["slug", "name", "description", "kind", "params", "action", "severity", "enabled", "version", "updated",
                  "updated_by", "versions"]
        read_only_fields = ["version", "updated", "updated_by", "versions"]


class RuleWriteSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=60, required=False)
    name = serializers.CharField(max_length=120, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    kind = serializers.CharField(required=False)
    params = serializers.JSONField(required=False)
    action = serializers.CharField(required=False)
    severity = serializers.CharField(required=False)
    enabled = serializers.BooleanField(required=False)
    comment = serializers.CharField(max_length=300, required=False, allow_blank=True)


class RecommendationSerializer(serializers.ModelSerializer):
    rule = serializers.CharField(source="rule.slug")

    class Meta:
        model = Recommendation
        fields = ["id", "rule", "rule_version", "subject_kind", "subject", "hosts", "action", "severity", "summary", "evidence",
                  "latest_evidence", "status", "created", "updated", "resolved_by", "resolved_at", "notified"]


class RecommendationResolveSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["done", "dismissed"])
