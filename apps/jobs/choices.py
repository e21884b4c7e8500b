"""Choices of the jobs app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class ClusterSyncModeChoices(models.TextChoices):
    MODE_COMMANDS = "commands", _("Slurm commands on PATH (squeue/sacct --json)")
    MODE_RESTD = "slurmrestd", _("slurmrestd")
    MODE_PUSH = "push", _("events pushed by prolog/epilog only")


class JobStateChoices(models.TextChoices):
    PENDING = "PENDING", _("Pending")
    RUNNING = "RUNNING", _("Running")
    SUSPENDED = "SUSPENDED", _("Suspended")
    COMPLETING = "COMPLETING", _("Completing")
    COMPLETED = "COMPLETED", _("Completed")
    FAILED = "FAILED", _("Failed")
    CANCELLED = "CANCELLED", _("Cancelled")
    TIMEOUT = "TIMEOUT", _("Timed out")
    NODE_FAIL = "NODE_FAIL", _("Node failure")
    OUT_OF_MEMORY = "OUT_OF_MEMORY", _("Out of memory")
    PREEMPTED = "PREEMPTED", _("Preempted")
    ENDED = "ENDED", _("Ended (final state unknown)")
    OTHER = "OTHER", _("Other")


class JobProductStatusChoices(models.TextChoices):
    """The states of a job's product; each product's own choices keep these values with its own words."""

    STATUS_WAITING = "waiting", _("Waiting")
    STATUS_RUNNING = "running", _("Building")
    STATUS_READY = "ready", _("Ready")
    STATUS_EMPTY = "empty", _("No samples")
    STATUS_FAILED = "failed", _("Failed")
