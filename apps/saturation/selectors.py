"""Read queries of the saturation app."""
from dataclasses import dataclass

from django.conf import settings

from .choices import JobSaturationStatusChoices
from .models import GpuModelCeiling, JobSaturation
from .scoring import DEFAULT_MODEL, MODELS, GpuModel, model_for
from .waste import Waste, gpu_hours_lost, is_wasteful, reference_score, steady_seconds, warming_up


def saturation_by_job(job_pks: list[int]) -> dict[int, JobSaturation]:
    """job pk -> its ready saturation result (score and flags), for job lists."""
    return {record.job_id: record for record in
            JobSaturation.objects.filter(job_id__in=job_pks, status=JobSaturationStatusChoices.STATUS_READY).only("job_id", "score", "flags", "status")}


def gpu_models() -> dict[str, GpuModel]:
    """The ceilings staff keep (admin: GPU model ceilings); the built-in defaults when the table is empty."""
    rows = {row.name: row.as_model() for row in GpuModelCeiling.objects.all()}
    return rows or dict(MODELS)


def gpu_model_for_job(job) -> GpuModel:
    """The ceilings for the GPU model of the job's nodes, as the topology knows it (the first node with a
    model; a job runs in one partition of one GPU kind)."""
    from apps.topology.models import Node

    name = (Node.objects.filter(hostname__in=list(job.node_list or [])[:64]).exclude(gpu_model="")
            .values_list("gpu_model", flat=True).first())
    models = gpu_models()
    return model_for(name, models, default=models.get(DEFAULT_MODEL.name))


@dataclass(frozen=True)
class JobWaste:
    """What a job's allocation lost so far, the one reading the triage inbox and the notifications share."""

    gpus: int  # the job's GPUs (Slurm's count; the scored GPUs when Slurm gave none)
    hours: float  # its run window so far (Job.run_window)
    wasteful: bool  # scored, past its warm-up, and wasteful by WASTE_SCORE_BELOW / WASTE_IDLE_SHARE (waste.is_wasteful)
    waste: Waste  # GPU-hours lost (and headroom) over those hours (waste.gpu_hours_lost)

    @property
    def warming_up(self) -> bool:
        return self.waste.warming_up


def record_warming_up(job, record: JobSaturation, now=None) -> bool:
    """Whether the job is still in its warm-up by its record (waste.warming_up): the scoring has not seen its steady
    state start and its data reach less than SATURATION_WARMUP_MAX_SECONDS past its start."""
    start = getattr(job, "start_time", None)
    until = record.scored_until or now
    observed = (until - start).total_seconds() if start is not None and until is not None else None
    return warming_up(steady_found=record.steady_found, observed_s=observed,
                      max_warmup_s=float(settings.SATURATION_WARMUP_MAX_SECONDS),
                      ended=getattr(job, "end_time", None) is not None)


def reference_scores() -> dict[str, float]:
    """GPU model -> the headroom reference (waste.reference_score) over the ready records past their warm-up."""
    by_model: dict[str, list] = {}
    rows = (JobSaturation.objects.filter(status=JobSaturationStatusChoices.STATUS_READY, score__isnull=False)
            .exclude(steady_found=False).order_by().values_list("gpu_model", "score"))
    for model, score in rows:
        by_model.setdefault(model or "", []).append(score)
    return {model: ref for model, scores in by_model.items() if (ref := reference_score(scores)) is not None}


def job_waste(job, record: JobSaturation, now=None, *, references: dict | None = None,
              failed_hosts=()) -> JobWaste:
    """``job``'s waste by its saturation ``record`` over its run until ``now``. ``references``: reference_scores()
    when the caller reads many jobs (read once here otherwise)."""
    gpus = int(job.gpus or len(record.per_gpu or []) or 0)
    window = job.run_window(now)
    hours = max(0.0, (window[1] - window[0]).total_seconds() / 3600) if window else 0.0
    warm = record.computed is not None and record_warming_up(job, record, now)
    if references is None:
        references = reference_scores()
    waste = gpu_hours_lost(hours, gpus, score=record.score, idle_gpus=record.idle_gpus or 0, per_gpu=record.per_gpu or None,
                           stragglers=record.stragglers, steady_s=steady_seconds(record.steady_start, record.scored_until),
                           failed_hosts=failed_hosts, reference=references.get(record.gpu_model or ""), warming_up=warm,
                           compute=record.compute)
    wasteful = record.computed is not None and is_wasteful(
        score=record.score, gpus=gpus, idle_gpus=record.idle_gpus or 0, lost_share=waste.own_share, warming_up=warm,
        score_below=settings.WASTE_SCORE_BELOW, idle_share=settings.WASTE_IDLE_SHARE)
    return JobWaste(gpus=gpus, hours=hours, wasteful=wasteful, waste=waste)
