"""Models of the saturation app: each job's latest saturation result (the heavy arrays live in a
product file next to the portal's data; this row is what lists and the API read)."""
from django.db import models

from apps.jobs.models import JobProduct

from .choices import JobSaturationStatusChoices
from .scoring import GpuModel


class JobSaturation(JobProduct):
    """One job's latest saturation result, scored along the lifecycle of apps/jobs/products.py."""

    built_field = "computed"
    refresh_setting = "SATURATION_REFRESH_SECONDS"
    busy_field = "scoring_since"

    status = models.CharField(max_length=20, choices=JobSaturationStatusChoices.choices,
                              default=JobSaturationStatusChoices.STATUS_WAITING)
    scoring_since = models.DateTimeField(null=True, blank=True,
                                         help_text="When the scoring now in progress started; empty when none runs. The "
                                                   "result fields keep the previous score meanwhile.")
    scoring_task = models.CharField(max_length=255, blank=True, help_text="Celery id of the scoring in progress.")
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
    steady_start = models.DateTimeField(null=True, blank=True)
    steady_found = models.BooleanField(null=True, blank=True,
                                       help_text="Whether the scoring saw the steady state start (the GPUs' median busy share "
                                                 "passed 0.5); false: still warming up, or never busy. Empty: scored before "
                                                 "this was kept (apps/saturation/waste.py warming_up).")
    scored_until = models.DateTimeField(null=True, blank=True,
                                        help_text="End of the last scoring bucket holding samples: how far the product reaches.")
    per_gpu = models.JSONField(default=list, blank=True)
    stragglers = models.JSONField(default=list, blank=True)
    gpu_model = models.CharField(max_length=40, blank=True, help_text="The ceilings row the score was computed against.")

    def __str__(self) -> str:
        return f"saturation of {self.job}: {self.status}"


class GpuModelCeiling(models.Model):
    """Practical ceilings and link peaks of one GPU model, which the score divides by. Staff calibrate
    them once per model (dcgmproftester, a STREAM-like HBM test, nvbandwidth / NCCL all-reduce) and
    edit them in the admin; the next scoring of each job uses them."""

    name = models.CharField(max_length=40, unique=True, help_text="e.g. GH200, H100 SXM")
    matches = models.CharField(max_length=200, help_text="Comma-separated parts of the device or topology GPU model name "
                                                         "that select this row, e.g. 'GH200' or 'H100 80GB HBM3, H100 SXM'.")
    tensor = models.FloatField(default=0.93, help_text="Ceiling of the tensor pipe activity (field 1004), 0-1.")
    fp64 = models.FloatField(default=1.0, help_text="Ceiling of the FP64 pipe activity (1006).")
    fp32 = models.FloatField(default=1.0, help_text="Ceiling of the FP32 pipe activity (1007).")
    fp16 = models.FloatField(default=1.0, help_text="Ceiling of the FP16 pipe activity (1008).")
    dram = models.FloatField(default=0.8, help_text="Ceiling of DRAM activity (1005); NVIDIA: about 0.8 in practice.")
    link = models.FloatField(default=0.9, help_text="Share of each link's peak reachable after protocol overhead.")
    nvlink_peak = models.FloatField(default=450e9, help_text="NVLink bytes/s per direction (all links of the GPU).")
    pcie_peak = models.FloatField(default=63e9, help_text="PCIe bytes/s per direction.")
    c2c_peak = models.FloatField(default=450e9, null=True, blank=True, help_text="NVLink-C2C bytes/s per direction (Grace Hopper only).")
    max_sm_clock_mhz = models.FloatField(default=1980.0, help_text="Used when the samples lack the max SM clock (field 113).")
    notes = models.TextField(blank=True, help_text="How and when these were calibrated.")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "GPU model ceiling"

    def __str__(self) -> str:
        return self.name

    def as_model(self) -> GpuModel:
        peaks = {"nvlink": self.nvlink_peak, "pcie": self.pcie_peak}
        if self.c2c_peak:
            peaks["c2c"] = self.c2c_peak
        return GpuModel(name=self.name, matches=tuple(part.strip() for part in self.matches.split(",") if part.strip()),
                        ceilings={"tensor": self.tensor, "fp64": self.fp64, "fp32": self.fp32, "fp16": self.fp16,
                                  "dram": self.dram, "link": self.link},
                        link_peaks=peaks, max_sm_clock_mhz=self.max_sm_clock_mhz)

    def clean(self):
        from django.core.exceptions import ValidationError

        errors = {}
        for name in ("tensor", "fp64", "fp32", "fp16", "dram", "link"):
            value = getattr(self, name)
            if value is None or not 0 < value <= 1:
                errors[name] = "a ceiling is a share of the counter's full scale: more than 0, at most 1"
        for name in ("nvlink_peak", "pcie_peak", "c2c_peak", "max_sm_clock_mhz"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                errors[name] = "must be positive"
        if not [part for part in self.matches.split(",") if part.strip()]:
            errors["matches"] = "give at least one part of a model name, e.g. GH200"
        if errors:
            raise ValidationError(errors)
