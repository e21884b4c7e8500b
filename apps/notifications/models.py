"""Models of the notifications app: which projects want mail, which mails went out (the rate limit reads
them), how long a straggler has been seen, and the staff digests sent."""
from django.conf import settings
from django.db import models

from apps.core.models import TimeStampedModel

from .choices import NotificationSentReasonChoices, NotificationSentStatusChoices, StaffDigestStatusChoices

#: Mails in these states count for the rate limit (``failed`` does not: the next run tries again).
COUNTING_STATUSES = (NotificationSentStatusChoices.STATUS_SENDING, NotificationSentStatusChoices.STATUS_SENT,
                     NotificationSentStatusChoices.STATUS_SKIPPED)


class ProjectNotifications(TimeStampedModel):
    """A project's opt-in: mail the job's user when one of the project's running jobs wastes its GPUs, or
    when it has a persistent straggler. Both off until a manager of the project (or staff) switches them on."""

    project = models.OneToOneField("accounts.Project", on_delete=models.CASCADE, related_name="notifications")
    waste = models.BooleanField(default=False, help_text="Mail the job's user when a running job wastes its GPUs.")
    straggler = models.BooleanField(default=False, help_text="Mail the job's user when a running job has a persistent straggler.")
    changed_by = models.CharField(max_length=150, blank=True, help_text="Who last switched these.")

    class Meta:
        verbose_name = "project notifications"
        verbose_name_plural = "project notifications"

    def __str__(self) -> str:
        return f"notifications of {self.project.slurm_account}"

    @property
    def any_on(self) -> bool:
        return self.waste or self.straggler


class UserNotifications(TimeStampedModel):
    """A user's own opt-in: a summary mail when one of their jobs ends (saturation, MFU, tokens/s per GPU, energy per
    token, stragglers, the job's link). Off until the user switches it on; only jobs that end after that are mailed."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings")
    job_end = models.BooleanField(default=False, help_text="Mail me a summary when one of my jobs ends.")
    job_end_since = models.DateTimeField(null=True, blank=True, help_text="When job_end was last switched on: jobs that "
                                                                            "ended before are not mailed.")

    class Meta:
        verbose_name = "user notifications"
        verbose_name_plural = "user notifications"

    def __str__(self) -> str:
        return f"notifications of user {self.user_id}"


class NotificationSent(models.Model):
    """One mail to a job's user (or the decision not to send it). The row is written, inside a transaction that
    holds the job's row lock, *before* the mail leaves: two workers running at once see each other's row and
    only one sends (``apps.notifications.services.notification_claim``)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="notifications_sent")
    reason = models.CharField(max_length=20, choices=NotificationSentReasonChoices.choices)
    status = models.CharField(max_length=20, choices=NotificationSentStatusChoices.choices,
                              default=NotificationSentStatusChoices.STATUS_SENDING)
    recipient = models.CharField(max_length=254, blank=True, help_text="The address written to; empty when skipped.")
    user_name = models.CharField(max_length=64, help_text="The job's Slurm user.")
    sent_at = models.DateTimeField(db_index=True, help_text="When it was claimed and sent (the rate limit counts from here).")
    subject = models.CharField(max_length=300, blank=True)
    detail = models.CharField(max_length=500, blank=True, help_text="Why it was skipped or failed.")

    class Meta:
        ordering = ["-sent_at", "-pk"]
        indexes = [models.Index(fields=["job", "reason", "-sent_at"])]

    def __str__(self) -> str:
        return f"{self.reason} mail for {self.job_id} at {self.sent_at:%Y-%m-%d %H:%M} ({self.status})"


class StragglerSighting(models.Model):
    """A straggler of a running job as this app's sweeps saw it: ``first_seen`` is when a sweep first found it in
    the job's saturation record, kept while every later sweep finds it again; a sweep that no longer finds it
    deletes the row (the lag stopped), so ``last_seen - first_seen`` is how long it has lasted without a break."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="straggler_sightings")
    key = models.CharField(max_length=300, help_text="level:host:gpu:switch:group of the finding.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    finding = models.JSONField(default=dict, help_text="The latest finding as the saturation record holds it.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="notifications_sighting_unique")]

    def __str__(self) -> str:
        return f"straggler {self.key} of {self.job_id} since {self.first_seen:%Y-%m-%d %H:%M}"


class StaffDigest(models.Model):
    """One staff digest of the triage inbox. ``slot`` numbers the NOTIFY_STAFF_DIGEST_HOURS periods since the
    epoch and is unique: a redelivered or doubled beat message finds the slot taken and sends nothing."""

    slot = models.BigIntegerField(unique=True)
    sent_at = models.DateTimeField()
    status = models.CharField(max_length=20, choices=StaffDigestStatusChoices.choices, default=StaffDigestStatusChoices.STATUS_SENDING)
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=300, blank=True)
    items = models.PositiveIntegerField(default=0)
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-sent_at"]

    def __str__(self) -> str:
        return f"staff digest {self.slot} ({self.status})"
