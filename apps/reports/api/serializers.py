"""Query parameters of the reports API (and of the page, which reads the same ones)."""
from datetime import datetime, timedelta, timezone

from rest_framework import serializers

from ..usage import GROUPS

DEFAULT_WINDOW = timedelta(days=7)
MAX_WINDOW = timedelta(days=400)
EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)


class UsageParams(serializers.Serializer):
    """Which jobs and which window: the window is ``[since, until)``; without either it is the last 7 days."""

    project = serializers.CharField(required=False, allow_blank=True, max_length=64,
                                    help_text="A Slurm account (project) you are a member of; staff: any.")
    user = serializers.CharField(required=False, allow_blank=True, max_length=64, help_text="A Slurm user name.")
    partition = serializers.CharField(required=False, allow_blank=True, max_length=64, help_text="A Slurm partition.")
    since = serializers.DateTimeField(required=False, help_text="Start of the window (ISO 8601, UTC when no offset); "
                                                                "default: 7 days before `until`.")
    until = serializers.DateTimeField(required=False, help_text="End of the window, excluded; default: now.")
    group_by = serializers.ChoiceField(choices=list(GROUPS), default="project", help_text="One row per project, user or partition.")

    def _bounded(self, value: datetime) -> datetime:
        if not EARLIEST <= value < LATEST:
            raise serializers.ValidationError(f"give a time between {EARLIEST:%Y} and {LATEST:%Y}")
        return value

    validate_since = _bounded
    validate_until = _bounded

    def validate(self, attrs):
        now = self.context.get("now") or datetime.now(timezone.utc)
        until = attrs.get("until") or now
        since = attrs.get("since") or until - DEFAULT_WINDOW
        if since >= until:
            raise serializers.ValidationError({"since": [f"since ({since:%Y-%m-%d %H:%M} UTC) must come before until "
                                                         f"({until:%Y-%m-%d %H:%M} UTC)"]})
        if until - since > MAX_WINDOW:
            raise serializers.ValidationError({"since": [f"a report covers at most {MAX_WINDOW.days} days"]})
        for name in ("project", "user", "partition"):
            attrs[name] = (attrs.get(name) or "").strip()
        return {**attrs, "since": since, "until": until}
