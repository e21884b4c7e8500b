"""Read queries of the saturation app."""
from .models import JobSaturation


def saturation_by_job(job_pks: list[int]) -> dict[int, JobSaturation]:
    """job pk -> its ready saturation result (score and flags), for job lists."""
    return {record.job_id: record for record in
            JobSaturation.objects.filter(job_id__in=job_pks, status="ready").only("job_id", "score", "flags", "status")}
