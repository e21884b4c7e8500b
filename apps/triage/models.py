"""The staff triage inbox: one row per thing that needs a person, kept in step with its source by
``services.triage_sync`` (upsert by ``key``) and moved by staff (acknowledge, resolve, mute, reopen)."""
from django.conf import settings
from django.db import models

from .choices import TriageItemKindChoices, TriageItemSeverityChoices, TriageItemStateChoices


class TriageItem(models.Model):
    kind = models.CharField(max_length=20, choices=TriageItemKindChoices.choices, db_index=True)
    key = models.CharField(max_length=200, unique=True,
                           help_text="Stable source key, <kind>:<subject>, e.g. wasteful_job:alps/1200123.")
    title = models.CharField(max_length=300)
    detail = models.TextField(blank=True)
    owner = models.CharField(max_length=200, blank=True,
                             help_text="Who it concerns: the job's user and project, the node, the requester, the owner team.")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="triage_items")
    url = models.CharField(max_length=500, blank=True, help_text="Where the evidence is (a portal path).")
    gpu_hours_lost = models.FloatField(null=True, blank=True, help_text="Wasteful jobs: GPU-hours lost over the run so far.")
    severity = models.CharField(max_length=10, choices=TriageItemSeverityChoices.choices,
                                default=TriageItemSeverityChoices.WARNING)
    rank = models.PositiveSmallIntegerField(default=2, help_text="Tier, lower first: 0 wasteful jobs, then by severity.")
    data = models.JSONField(default=dict, blank=True, help_text="Facts the actions need (host, request, e-mail, GPUs).")
    state = models.CharField(max_length=20, choices=TriageItemStateChoices.choices, default=TriageItemStateChoices.NEW,
                             db_index=True)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    muted_until = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=300, blank=True, help_text="The last change's why (by a person or the sync).")
    open_at_source = models.BooleanField(default=True, help_text="Whether its source still held at the last sync.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["rank", models.F("gpu_hours_lost").desc(nulls_last=True), "first_seen", "id"]
        indexes = [models.Index(fields=["state", "rank"])]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"
