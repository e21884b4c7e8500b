"""Read queries of the saturation app."""
from .choices import JobSaturationStatusChoices
from .models import GpuModelCeiling, JobSaturation
from .scoring import DEFAULT_MODEL, MODELS, GpuModel, model_for


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
