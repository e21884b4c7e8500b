"""Choices of the notifications app's models, named ``<Model><Field>Choices``: models and code compare with these,
never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class NotificationSentReasonChoices(models.TextChoices):
    """Why a job's user was written to (one mail per job and reason within NOTIFY_RATE_LIMIT_HOURS)."""

    REASON_WASTEFUL = "wasteful", _("Wasteful job")
    REASON_STRAGGLER = "straggler", _("Persistent straggler")
    REASON_JOB_END = "job_end", _("Job ended (summary)")


class NotificationSentStatusChoices(models.TextChoices):
    """How one mail ended. ``sending``: claimed, the mail is on its way (counts for the rate limit, so a second
    worker never sends it too); ``skipped``: the job's user has no portal account or no e-mail address (counts
    too: the next run would only skip again); ``failed``: the mail server refused it (does not count: the
    next run tries again)."""

    STATUS_SENDING = "sending", _("Sending")
    STATUS_SENT = "sent", _("Sent")
    STATUS_SKIPPED = "skipped", _("Skipped (no e-mail address)")
    STATUS_FAILED = "failed", _("Failed")


class StaffDigestStatusChoices(models.TextChoices):
    STATUS_SENDING = "sending", _("Sending")
    STATUS_SENT = "sent", _("Sent")
    STATUS_FAILED = "failed", _("Failed")
