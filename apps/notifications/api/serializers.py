"""Serializers of the notifications API."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..choices import NotificationSentReasonChoices, NotificationSentStatusChoices


class ProjectNotificationsSerializer(serializers.Serializer):
    """A project's opt-ins as the API shows them."""

    project = serializers.CharField(source="project.slurm_account", read_only=True, help_text="The project's Slurm account.")
    title = serializers.CharField(source="project.title", read_only=True)
    waste = serializers.BooleanField(read_only=True, help_text="Mail the job's user when a running job wastes its GPUs.")
    straggler = serializers.BooleanField(read_only=True, help_text="Mail the job's user when a running job has a persistent straggler.")
    changed_by = serializers.CharField(read_only=True, help_text="Who last switched them; empty when never switched.")
    modified = serializers.DateTimeField(read_only=True, allow_null=True, help_text="When they were last switched.")
    may_change = serializers.SerializerMethodField(help_text="Whether you may switch them: the project's managers and staff.")
    managers = serializers.SerializerMethodField(help_text="Usernames of the project's managers (who may switch them).")

    @extend_schema_field(serializers.BooleanField())
    def get_may_change(self, obj) -> bool:
        return bool(self.context.get("may_change"))

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_managers(self, obj) -> list[str]:
        return list(self.context.get("managers", []))


class ProjectNotificationsPatchSerializer(serializers.Serializer):
    """What a PATCH may change: ``waste`` and/or ``straggler`` (true or false); nothing else."""

    waste = serializers.BooleanField(required=False, help_text="Mail the job's user when a running job wastes its GPUs.")
    straggler = serializers.BooleanField(required=False, help_text="Mail the job's user when a running job has a persistent straggler.")

    def validate(self, attrs):
        unknown = sorted(set(getattr(self, "initial_data", {}) or {}) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: "unknown field: only waste and straggler can be changed" for name in unknown})
        if not attrs:
            raise serializers.ValidationError("give waste and/or straggler (true or false)")
        return attrs

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["the body must be a JSON object such as {\"waste\": true}"]})
        return super().to_internal_value(data)


class NotificationSentSerializer(serializers.Serializer):
    """One mail about a job (GET lists)."""

    job = serializers.SerializerMethodField(help_text="cluster/job id")
    reason = serializers.ChoiceField(choices=NotificationSentReasonChoices.choices, read_only=True)
    status = serializers.ChoiceField(choices=NotificationSentStatusChoices.choices, read_only=True)
    user_name = serializers.CharField(read_only=True)
    sent_at = serializers.DateTimeField(read_only=True)
    subject = serializers.CharField(read_only=True)
    detail = serializers.CharField(read_only=True)

    def get_job(self, obj) -> str:
        return f"{obj.job.cluster.name}/{obj.job.display_id}"
