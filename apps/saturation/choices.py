"""Choices of the saturation app's models, named ``<Model><Field>Choices``."""
from django.db import models


class JobSaturationStatusChoices(models.TextChoices):
    """The state of the *result* a record holds (the values of :class:`apps.jobs.choices.JobProductStatusChoices`).
    A scoring in progress does not change it (see ``JobSaturation.scoring_since``), so the previous score stays
    visible while the next is computed. ``running`` is only read from rows written before that; the sweeper
    turns them into ``waiting``."""

    STATUS_WAITING = "waiting", "Waiting for telemetry"
    STATUS_RUNNING = "running", "Scoring"
    STATUS_READY = "ready", "Ready"
    STATUS_EMPTY = "empty", "No telemetry"
    STATUS_FAILED = "failed", "Failed"
