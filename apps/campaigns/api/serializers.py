"""What the campaigns API accepts: the owner's edit of a campaign's membership and name."""
from rest_framework import serializers

from apps.core.api.params import JobRefField

MAX_EDIT_JOBS = 200


class CampaignPatchSerializer(serializers.Serializer):
    """Change a campaign: rename it, add jobs you may see (``join``: moved from any campaign they were in), take jobs
    out (``leave``: detection will not put them back), or split it at a job (``split_at``: it and every later job
    become a new campaign). At least one of them."""

    name = serializers.CharField(required=False, max_length=200, min_length=1, trim_whitespace=True)
    join = serializers.ListField(child=JobRefField(), required=False, max_length=MAX_EDIT_JOBS,
                                 help_text="cluster/job_id of jobs to add")
    leave = serializers.ListField(child=JobRefField(), required=False, max_length=MAX_EDIT_JOBS,
                                  help_text="cluster/job_id of jobs to take out")
    split_at = JobRefField(required=False, help_text="cluster/job_id: this job and the later ones become a new campaign")

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give at least one of name, join, leave, split_at.")
        return attrs


class CampaignCreateSerializer(serializers.Serializer):
    """Put jobs together as a campaign by hand (jobs that are yours, of one account on one cluster; a job already in a
    campaign moves to this one)."""

    name = serializers.CharField(max_length=200, min_length=1, trim_whitespace=True)
    jobs = serializers.ListField(child=JobRefField(), min_length=1, max_length=MAX_EDIT_JOBS, help_text="cluster/job_id")
