"""What the saturation app lets the rank map colour GPUs by (apps.core.gpu_colourings): S per GPU,
the limiter per GPU, and whether a GPU is a straggler. The ranks app offers them in its "Colour by"
select once the job is scored, without importing this app.

``register()`` is called from SaturationConfig.ready().
"""
from __future__ import annotations

from apps.core.gpu_colourings import register_gpu_colouring

from .choices import JobSaturationStatusChoices
from .models import JobSaturation

LIMITER_WORDS = {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                 "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}
STRAGGLER, KEEPS_PACE = "straggler", "keeps pace"


def _ready(job) -> JobSaturation | None:
    return JobSaturation.objects.filter(job=job, status=JobSaturationStatusChoices.STATUS_READY).only("per_gpu").first()


def scored(job) -> bool:
    """Cheap: does the job have a ready score (one indexed query, no per-GPU rows read)?"""
    return JobSaturation.objects.filter(job=job, status=JobSaturationStatusChoices.STATUS_READY).exists()


def s_per_gpu(job) -> dict[tuple[str, int], float | None] | None:
    """S (0-100) per GPU, the steady-state mean the job's score averages; None until scored."""
    record = _ready(job)
    if record is None:
        return None
    return {(gpu["host"], int(gpu["gpu"])): gpu.get("score") for gpu in record.per_gpu}


def limiter_per_gpu(job) -> dict[tuple[str, int], str] | None:
    """The resource that limits each GPU most of the time, in words; None until scored."""
    record = _ready(job)
    if record is None:
        return None
    return {(gpu["host"], int(gpu["gpu"])): LIMITER_WORDS.get(gpu.get("limiter") or "", gpu.get("limiter") or "")
            for gpu in record.per_gpu}


def straggler_per_gpu(job) -> dict[tuple[str, int], str] | None:
    """"straggler" for each GPU the straggler detector names (alone or as part of its node), "keeps
    pace" for the others; None until scored."""
    record = _ready(job)
    if record is None:
        return None
    return {(gpu["host"], int(gpu["gpu"])): STRAGGLER if gpu.get("straggler") else KEEPS_PACE for gpu in record.per_gpu}


def register() -> None:
    register_gpu_colouring(
        "saturation", "Saturation S", s_per_gpu, kind="number", available=scored, order=10, aggregate="min",
        value_range=(0, 100), colourscale="Viridis",
        description="S is how saturated a GPU is (0–100): its busiest resource against its practical ceiling.")
    register_gpu_colouring(
        "limiter", "Limiter", limiter_per_gpu, kind="label", available=scored, order=11,
        description="The limiter is the resource that sets a GPU's S most of the time.")
    register_gpu_colouring(
        "straggler", "Straggler", straggler_per_gpu, kind="label", available=scored, order=12, priority=(STRAGGLER,),
        label_colours={STRAGGLER: "#c62828", KEEPS_PACE: "#1f77b4"},
        description="A straggler lags its peers (the same stage, replica or node) enough to slow the job.")
