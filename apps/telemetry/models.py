"""What the portal records about telemetry it receives (the samples live in the telemetry store).

:class:`IngestBatch` is one posted batch or import: who sent it, how many samples were kept and
rejected, and the first errors. Staff see them; the ``telemetry.add_ingestbatch`` permission is what
a collector's service token needs to post samples for any host.
"""
from django.conf import settings
from django.db import models


class IngestBatch(models.Model):
    received = models.DateTimeField(auto_now_add=True)
    sender = models.CharField(max_length=200, help_text="User name, or 'job <cluster>/<id>' for a job token.")
    source = models.CharField(max_length=40, help_text="samples, dcgmi-dmon, dcgm-exporter, demo")
    cluster = models.CharField(max_length=64, blank=True)
    hosts = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    bytes = models.PositiveBigIntegerField(default=0)
    first_errors = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-received"]
        indexes = [models.Index(fields=["-received"], name="telemetry_batch_received")]

    def __str__(self) -> str:
        return f"{self.source} from {self.sender}: {self.accepted} kept, {self.rejected} rejected"


class JobTelemetryStatusChoices(models.TextChoices):
    STATUS_WAITING = "waiting", "Waiting for the job to start"
    STATUS_RUNNING = "running", "Reading the telemetry store"
    STATUS_READY = "ready", "Ready"
    STATUS_EMPTY = "empty", "No samples found"
    STATUS_FAILED = "failed", "Failed"


class JobTelemetry(models.Model):
    """The state of one job's telemetry data product (the bucketed cube pages read)."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="telemetry")
    status = models.CharField(max_length=20, choices=JobTelemetryStatusChoices.choices,
                              default=JobTelemetryStatusChoices.STATUS_WAITING)
    message = models.CharField(max_length=500, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)
    materialized = models.DateTimeField(null=True, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    step_seconds = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    fields = models.JSONField(default=list, blank=True)
    samples = models.PositiveBigIntegerField(default=0)
    # What the store really held, not the window asked for: the first bucket with a sample and the
    # end of the last one, and how many GPUs reported at all.
    first_sample = models.DateTimeField(null=True, blank=True)
    last_sample = models.DateTimeField(null=True, blank=True)
    gpus_reporting = models.PositiveIntegerField(null=True, blank=True)
    product = models.CharField(max_length=500, blank=True, help_text="Path of the cube, relative to the data folder.")
    # Written by ingestion when a batch reaches the job (apps/telemetry/services.samples_arrived), never by the
    # refresh that builds the cube: {source: {"first": ISO time, "last": ISO time}} of the samples each
    # ingestion source (IngestBatch.source, "dcgm-live") delivered for the job's nodes and run time.
    sources = models.JSONField(default=dict, blank=True)
    # The earliest sample that arrived since the cube last read the store: an incremental update re-reads
    # from its bucket (samples that arrive late land in buckets the cube already holds).
    pending_from = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Ingestion finds the recently ended jobs a batch may still touch through their product's window.
        indexes = [models.Index(fields=["window_end"], name="telemetry_job_window_end")]

    def __str__(self) -> str:
        return f"telemetry of {self.job}: {self.status}"
