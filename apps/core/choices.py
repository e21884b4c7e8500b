"""Choices of the core app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class TaskRunStatusChoices(models.TextChoices):
    STATUS_PENDING = "pending", _("Pending")
    STATUS_RUNNING = "running", _("Running")
    STATUS_SUCCEEDED = "succeeded", _("Succeeded")
    STATUS_FAILED = "failed", _("Failed")


class JobProductStatusChoices(models.TextChoices):
    """The states of a job's product; each product's own choices keep these values with its own words."""

    STATUS_WAITING = "waiting", _("Waiting")
    STATUS_RUNNING = "running", _("Building")
    STATUS_READY = "ready", _("Ready")
    STATUS_EMPTY = "empty", _("No samples")
    STATUS_FAILED = "failed", _("Failed")
