"""Models of the saturation app: each job's latest saturation result (the heavy arrays live in a
product file next to the portal's data; this row is what lists and the API read)."""
from django.db import models


class JobSaturationStatusChoices(models.TextChoices):
    STATUS_WAITING = "waiting", "Waiting for telemetry"
    STATUS_RUNNING = "running", "Scoring"
    STATUS_READY = "ready", "Ready"
    STATUS_EMPTY = "empty", "No telemetry"
    STATUS_FAILED = "failed", "Failed"


class JobSaturation(models.Model):
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="saturation")
    status = models.CharField(max_length=20, choices=JobSaturationStatusChoices.choices,
                              default=JobSaturationStatusChoices.STATUS_WAITING)
    message = models.CharField(max_length=500, blank=True)
    computed = models.DateTimeField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="0-100: mean over GPUs of the steady-state mean of S.")
    compute = models.FloatField(null=True, blank=True)
    memory = models.FloatField(null=True, blank=True)
    link = models.FloatField(null=True, blank=True)
    limiter = models.CharField(max_length=20, blank=True)
    labels = models.JSONField(default=list, blank=True)
    flags = models.JSONField(default=list, blank=True, help_text="Short flags for job lists: idle, straggler, ...")
    imbalance = models.FloatField(null=True, blank=True)
    idle_gpus = models.PositiveIntegerField(default=0)
    energy_j = models.FloatField(null=True, blank=True)
    energy_low_j = models.FloatField(null=True, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    steady_start = models.DateTimeField(null=True, blank=True)
    samples = models.PositiveBigIntegerField(default=0)
    per_gpu = models.JSONField(default=list, blank=True)
    stragglers = models.JSONField(default=list, blank=True)
    product = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"saturation of {self.job}: {self.status}"
