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
