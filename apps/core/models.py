"""Shared base models and the few records every app relies on.

* :class:`TimeStampedModel` - abstract base with creation and modification times.
* :class:`Heartbeat` - last sign of life of a background process (beat, workers, syncs).
* :class:`TaskRun` - a user-visible record of one long-running operation (status, progress,
  log), written by Celery tasks so the UI can show progress without reading the broker.
* :class:`DemoState` - which demo system is loaded, so ``make run`` builds it only once.
"""
from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .choices import TaskRunStatusChoices


class TimeStampedModel(models.Model):
    """Abstract base: ``created`` and ``modified`` kept by the database layer."""

    created = models.DateTimeField(auto_now_add=True)
    modified = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Heartbeat(models.Model):
    """The most recent time a named background process reported that it is alive."""

    name = models.CharField(max_length=100, unique=True)
    last_seen = models.DateTimeField()
    details = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_seen:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def beat(cls, name: str, **details) -> "Heartbeat":
        heartbeat, _created = cls.objects.update_or_create(
            name=name, defaults={"last_seen": timezone.now(), "details": details}
        )
        return heartbeat


class TaskRun(TimeStampedModel):
    """One long-running operation as the user sees it: what, for whom, how far, and how it ended.

    Tasks update it through :meth:`start`, :meth:`report` and :meth:`finish`; pages poll it.
    The row outlives the broker's result, so progress and logs stay visible after a restart.
    """

    name = models.CharField(max_length=100, help_text=_("Stable task name, e.g. 'jobs.sync_cluster'."))
    subject = models.CharField(max_length=200, blank=True, help_text=_("What the run works on, e.g. 'cluster alps'."))
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    celery_task_id = models.CharField(max_length=255, blank=True)
    status = models.CharField(
        max_length=20, choices=TaskRunStatusChoices.choices, default=TaskRunStatusChoices.STATUS_PENDING
    )
    done = models.PositiveBigIntegerField(default=0)
    total = models.PositiveBigIntegerField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True)
    log = models.TextField(blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["name", "-created"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.subject or 'no subject'}): {self.status}"

    @property
    def fraction(self) -> float | None:
        """Completed share in [0, 1], or None while the total is unknown."""
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    def _append_log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        self.log = f"{self.log}{stamp} {line}\n"

    def start(self, message: str = "", total: int | None = None) -> None:
        self.status = TaskRunStatusChoices.STATUS_RUNNING
        self.started = timezone.now()
        self.total = total
        self.message = message[:500]
        if message:
            self._append_log(message)
        self.save(update_fields=["status", "started", "total", "message", "log", "modified"])

    def report(self, done: int, message: str = "", total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if message:
            self.message = message[:500]
            self._append_log(message)
        self.save(update_fields=["done", "total", "message", "log", "modified"])

    def finish(self, *, error: str = "") -> None:
        self.status = TaskRunStatusChoices.STATUS_FAILED if error else TaskRunStatusChoices.STATUS_SUCCEEDED
        self.finished = timezone.now()
        if error:
            self.message = error[:500]
            self._append_log(f"failed: {error}")
        elif self.total is not None:
            self.done = self.total
        self.save(update_fields=["status", "finished", "message", "log", "done", "modified"])

    def requeued(self, reason: str) -> None:
        """This execution's worker was lost mid-run; its message is back in the queue and a later run does the work."""
        self.status = TaskRunStatusChoices.STATUS_REQUEUED
        self.finished = timezone.now()
        self.message = reason[:500]
        self._append_log(f"lost: {reason}")
        self.save(update_fields=["status", "finished", "message", "log", "modified"])


class DemoState(models.Model):
    """The demo system currently loaded: its seed, when it was built, and which parts it holds."""

    seed = models.BigIntegerField()
    built = models.DateTimeField(default=timezone.now)
    parts = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"demo seed {self.seed} built {self.built:%Y-%m-%d %H:%M}"
