"""Serializers of the triage API: the list's filters, an item, and the change of an item's state."""
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework import serializers

from ..choices import TriageItemKindChoices, TriageItemStateChoices


class TriageListParams(serializers.Serializer):
    kind = serializers.ChoiceField(choices=TriageItemKindChoices.choices, required=False,
                                   help_text="Only items of this kind.")
    state = serializers.ChoiceField(choices=[("open", "open (new and acknowledged)"), *TriageItemStateChoices.choices,
                                             ("all", "all")], required=False, default="open",
                                    help_text="Only items in this state; `open` (default) is new and acknowledged, `all` every one.")


class TriageItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    key = serializers.CharField()
    kind = serializers.CharField()
    title = serializers.CharField()
    detail = serializers.CharField()
    owner = serializers.CharField()
    job = serializers.SerializerMethodField()
    url = serializers.CharField(help_text="Where the evidence is (a portal path).")
    gpu_hours_lost = serializers.FloatField(allow_null=True)
    severity = serializers.CharField()
    rank = serializers.IntegerField(help_text="Tier, lower first: 0 wasteful jobs (then by GPU-hours lost), then by severity.")
    state = serializers.CharField()
    assignee = serializers.SerializerMethodField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    muted_until = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()
    open_at_source = serializers.BooleanField()
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()

    def get_job(self, item) -> str | None:
        return f"{item.job.cluster.name}/{item.job.job_id}" if item.job_id and item.job else None

    def get_assignee(self, item) -> str | None:
        return item.assignee.get_username() if item.assignee_id and item.assignee else None


class TriageUpdateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=TriageItemStateChoices.choices,
                                    help_text="acknowledged (with an assignee, default: you), resolved, muted (with muted_until) "
                                              "or new (reopen).")
    assignee = serializers.CharField(required=False, allow_null=True, max_length=150,
                                     help_text="Username of the staff member it is assigned to (state acknowledged only).")
    muted_until = serializers.DateTimeField(required=False, allow_null=True,
                                            help_text="ISO 8601 time the mute ends, in the future (state muted only).")
    note = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")

    def validate_assignee(self, value):
        if value in (None, ""):
            return None
        user = get_user_model().objects.filter(username=value).first()
        if user is None:
            raise serializers.ValidationError(f"no user {value!r}")
        if not (user.is_staff and user.is_active):
            raise serializers.ValidationError(f"{value} is not active staff: only staff are assigned items")
        return user

    def validate(self, attrs):
        state, until = attrs["state"], attrs.get("muted_until")
        if state == TriageItemStateChoices.MUTED:
            if until is None:
                raise serializers.ValidationError({"muted_until": "a mute needs the time it ends"})
            if until <= timezone.now():
                raise serializers.ValidationError({"muted_until": "the mute must end in the future"})
        elif until is not None:
            raise serializers.ValidationError({"muted_until": "only a mute (state muted) has an end"})
        if attrs.get("assignee") is not None and state != TriageItemStateChoices.ACKNOWLEDGED:
            raise serializers.ValidationError({"assignee": "an assignee goes with state acknowledged"})
        return attrs


class TriageCountsSerializer(serializers.Serializer):
    by_kind = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()))
    totals = serializers.DictField(child=serializers.IntegerField())
    open = serializers.IntegerField(help_text="New and acknowledged items.")
    gpu_hours_lost_open = serializers.FloatField(help_text="GPU-hours lost by the wasteful jobs of the open items.")
    synced_at = serializers.DateTimeField(allow_null=True, help_text="When a sync last found an item open at its source.")


class TriageListResponse(serializers.Serializer):
    counts = TriageCountsSerializer()
    results = TriageItemSerializer(many=True)
