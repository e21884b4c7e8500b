"""Shared base models and the few records every app relies on.

* :class:`TimeStampedModel` - abstract base with creation and modification times.
* :class:`Heartbeat` - last sign of life of a background process (beat, workers, syncs).
* :class:`TaskRun` - a user-visible record of one long-running operation (status, progress,
  log), written by Celery tasks so the UI can show progress without reading the broker.
* :class:`DemoState` - which demo system is loaded, so ``make run`` builds it only once.
* :class:`JobProduct` - abstract base of a product of one job (telemetry's cube, saturation's score):
  refreshed while the job runs, once after it ends (the lifecycle is :mod:`apps.core.products`).
"""
from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .choices import JobProductStatusChoices, TaskRunStatusChoices


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


class DemoState(models.Model):
    """The demo system currently loaded: its seed, when it was built, and which parts it holds."""

    seed = models.BigIntegerField()
    built = models.DateTimeField(default=timezone.now)
    parts = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"demo seed {self.seed} built {self.built:%Y-%m-%d %H:%M}"


class JobProduct(models.Model):
    """Abstract base of a product of one job, refreshed while the job runs and once after it ends.

    A concrete product names the field holding when it was last built (``built_field``) and the setting
    holding how old a running job's product may get (``refresh_setting``); ``busy_field``, when set, names
    a field that is not null while a build of the product runs (the sweeper leaves such a job alone).
    Each concrete model is found by :func:`apps.core.products.job_products`: no registration needed.
    """

    built_field: str = ""
    refresh_setting: str = ""
    busy_field: str | None = None

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="%(app_label)s")
    status = models.CharField(max_length=20, choices=JobProductStatusChoices.choices,
                              default=JobProductStatusChoices.STATUS_WAITING)
    message = models.CharField(max_length=500, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True, help_text=_("End of the job's run window the product "
                                                                            "was last built over."))
    step_seconds = models.PositiveIntegerField(null=True, blank=True, help_text=_("Bucket width in seconds."))
    samples = models.PositiveBigIntegerField(default=0, help_text=_("Telemetry samples the product was built from."))
    product = models.CharField(max_length=500, blank=True, help_text=_("Path of the product, relative to the data folder."))

    class Meta:
        abstract = True

    @property
    def built_at(self):
        """When the product was last built (None: never)."""
        return getattr(self, self.built_field)

    def has_product(self) -> bool:
        """Whether the record points at a built product that pages can show."""
        return self.status == JobProductStatusChoices.STATUS_READY and bool(self.product)

    def is_stale(self, job, now=None) -> bool:
        """Whether the lifecycle wants the product built again (:func:`apps.core.products.needs_refresh`)."""
        from .products import fresh_since, needs_refresh

        return needs_refresh(job_end=job.end_time, built=self.built_at, reaches=self.window_end,
                             fresh_since=fresh_since(type(self), now))
