"""Training campaigns: the jobs (allocations) that train one run."""
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TimeStampedModel

from .choices import CampaignSourceChoices


class Campaign(TimeStampedModel):
    """A chain of jobs that trains one run. ``key`` is what detection found it by ("singleton:alps:acct:name"); a
    campaign its owner edited (renamed, joined, split) keeps its members whatever detection finds later."""

    key = models.CharField(max_length=400, unique=True)
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=20, choices=CampaignSourceChoices.choices)
    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="campaigns")
    account = models.CharField(max_length=64, blank=True, db_index=True)
    user_name = models.CharField(max_length=64, db_index=True, help_text=_("Its owner: the Slurm user of its first job."))
    edited = models.BooleanField(default=False, help_text=_("Its owner changed it: detection leaves its members alone."))

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name


class CampaignJob(models.Model):
    """A job's place in a campaign. ``campaign`` null: its owner took the job out, and detection leaves it out."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="campaign_membership")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="members", null=True, blank=True)
    pinned = models.BooleanField(default=False, help_text=_("Placed by the owner (join, split, leave), not by detection."))

    def __str__(self) -> str:
        return f"{self.job} in {self.campaign or 'no campaign'}"
