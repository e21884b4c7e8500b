"""Parameters of the system API."""
from rest_framework import serializers

from apps.jobs.selectors import cluster_list


class OverviewParams(serializers.Serializer):
    """``GET /api/v1/system/overview/``: optionally one cluster's running jobs only."""

    cluster = serializers.CharField(required=False, allow_blank=False, max_length=64,
                                    help_text="A cluster name (e.g. alps); all clusters when left out.")

    def validate_cluster(self, value: str) -> str:
        if not cluster_list().filter(name=value).exists():
            known = ", ".join(cluster_list().values_list("name", flat=True)) or "none yet"
            raise serializers.ValidationError(f"no cluster named {value!r}; known clusters: {known}")
        return value
