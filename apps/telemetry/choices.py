"""Choices of the telemetry app's models, named ``<Model><Field>Choices``."""
from django.db import models


class JobTelemetryStatusChoices(models.TextChoices):
    """The values of :class:`apps.jobs.choices.JobProductStatusChoices`, in telemetry's words."""

    STATUS_WAITING = "waiting", "Waiting for the job to start"
    STATUS_RUNNING = "running", "Reading the telemetry store"
    STATUS_READY = "ready", "Ready"
    STATUS_EMPTY = "empty", "No samples found"
    STATUS_FAILED = "failed", "Failed"
