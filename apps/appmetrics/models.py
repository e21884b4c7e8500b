"""What the appmetrics app stores in the database: a job's model configuration and its PDF report.

The application series themselves (tokens/s, iteration time, loss, ...) live in the telemetry store as
job-scoped series (``TelemetryBackend.write_job_series``), beside the GPU samples they are compared with.
"""
from django.db import models

from apps.jobs.models import Job

from .choices import JobModelConfigSourceChoices, JobReportStatusChoices


#: The model config's fields, in the order the API and the pages show them.
MODEL_FIELDS = ("params", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "seq_len", "vocab", "global_batch", "swiglu",
                "moe_experts", "moe_topk", "moe_ffn_hidden", "gpu_peak_tflops")


class JobModelConfig(models.Model):
    """The model a job trains, as far as FLOPs per token need it (``apps.appmetrics.flops.ModelConfig``)."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="model_config")
    params = models.BigIntegerField(null=True, blank=True, help_text="Total parameters, as the user states them (shown; FLOPs use the shape).")
    layers = models.PositiveIntegerField()
    hidden = models.PositiveIntegerField()
    ffn_hidden = models.PositiveIntegerField(null=True, blank=True, help_text="Default 4 x hidden.")
    heads = models.PositiveIntegerField()
    kv_heads = models.PositiveIntegerField(null=True, blank=True, help_text="Grouped-query attention groups; default: heads.")
    seq_len = models.PositiveIntegerField()
    vocab = models.PositiveIntegerField()
    global_batch = models.PositiveIntegerField(null=True, blank=True, help_text="Sequences per iteration.")
    swiglu = models.BooleanField(default=False)
    moe_experts = models.PositiveIntegerField(null=True, blank=True)
    moe_topk = models.PositiveIntegerField(null=True, blank=True)
    moe_ffn_hidden = models.PositiveIntegerField(null=True, blank=True, help_text="Each expert's FFN width; default: ffn_hidden.")
    gpu_peak_tflops = models.FloatField(null=True, blank=True, help_text="Dense BF16 peak per GPU; default: from the GPU model.")
    source = models.CharField(max_length=20, choices=JobModelConfigSourceChoices.choices, default=JobModelConfigSourceChoices.API)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.job}: {self.layers} layers x {self.hidden}"


class JobReport(models.Model):
    """The PDF report of a job, built by a worker on request."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="pdf_report")
    status = models.CharField(max_length=20, choices=JobReportStatusChoices.choices, default=JobReportStatusChoices.WAITING)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done while building.")
    message = models.CharField(max_length=500, blank=True)
    requested = models.DateTimeField(auto_now_add=True)
    built = models.DateTimeField(null=True, blank=True)
    path = models.CharField(max_length=500, blank=True, help_text="Relative to the data folder.")
    pages = models.PositiveSmallIntegerField(default=0)

    def __str__(self) -> str:
        return f"report of {self.job} ({self.status})"
