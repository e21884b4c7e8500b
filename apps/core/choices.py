"""Choices of the core app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class TaskRunStatusChoices(models.TextChoices):
    STATUS_PENDING = "pending", _("Pending")
    STATUS_RUNNING = "running", _("Running")
    STATUS_SUCCEEDED = "succeeded", _("Succeeded")
    STATUS_FAILED = "failed", _("Failed")
    # Its worker was lost (killed) mid-run and its message went back into the queue: a later run does it.
    STATUS_REQUEUED = "requeued", _("Requeued")
