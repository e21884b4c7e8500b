"""What the portal records about telemetry it receives (the samples live in the telemetry store).

:class:`IngestBatch` is one posted batch or import: who sent it, how many samples were kept and
rejected, and the first errors. Staff see them; the ``telemetry.add_ingestbatch`` permission is what
a collector's service token needs to post samples for any host.
"""
from django.conf import settings
from django.db import models

from apps.jobs.models import JobProduct

from .choices import JobTelemetryStatusChoices


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


class JobTelemetry(JobProduct):
    """The state of one job's telemetry data product (the bucketed cube pages read): built by
    apps/telemetry/services.py along the lifecycle of apps/jobs/products.py."""

    built_field = "materialized"
    refresh_setting = "TELEMETRY_REFRESH_SECONDS"

    status = models.CharField(max_length=20, choices=JobTelemetryStatusChoices.choices,
                              default=JobTelemetryStatusChoices.STATUS_WAITING)
    attempts = models.PositiveIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)
    materialized = models.DateTimeField(null=True, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    fields = models.JSONField(default=list, blank=True)
    # What the store really held, not the window asked for: the first bucket with a sample and the
    # end of the last one, and how many GPUs reported at all.
    first_sample = models.DateTimeField(null=True, blank=True)
    last_sample = models.DateTimeField(null=True, blank=True)
    gpus_reporting = models.PositiveIntegerField(null=True, blank=True)
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


class VersionFact(models.Model):
    """A version a node or GPU had (``apps/telemetry/versions.py``): one row per host, GPU, key and value, with the
    first and last time it was seen. Seen again unchanged, only ``last_seen`` moves; a new value is a new row, so
    the rows of a host and key are its history. Never a sample: the telemetry store holds numbers only."""

    cluster = models.CharField(max_length=64, blank=True)
    host = models.CharField(max_length=64)
    gpu = models.SmallIntegerField(default=-1, help_text="GPU index; -1 for a node's version (driver, NCCL, ...).")
    key = models.CharField(max_length=20, help_text="driver, cuda_driver, nvml, vbios, inforom_image, ..., nccl, "
                                                    "ofi_nccl, libfabric, cxi, image_digest (versions.KEYS).")
    value = models.CharField(max_length=200)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    partition = models.CharField(max_length=64, blank=True, help_text="The Slurm partition it was last seen in, when told.")
    source = models.CharField(max_length=40, blank=True, help_text="samples, dcgm-exporter, dcgmi-dmon, preflight, demo")

    class Meta:
        ordering = ["host", "key", "gpu", "-last_seen"]
        constraints = [models.UniqueConstraint(fields=["host", "gpu", "key", "value"], name="telemetry_version_fact_unique")]
        indexes = [models.Index(fields=["host", "key", "-last_seen"], name="telemetry_version_host_key"),
                   models.Index(fields=["key", "-last_seen"], name="telemetry_version_key_seen")]

    def __str__(self) -> str:
        where = self.host if self.gpu < 0 else f"{self.host} GPU {self.gpu}"
        return f"{where}: {self.key} {self.value}"
