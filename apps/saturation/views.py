"""The saturation section of the job page."""
import json
from pathlib import Path

from django.conf import settings

from .api.views import SORTS, heatmap_order
from .figures import METRIC_TITLES, bands, heatmap, utilisation_vs_saturation
from .models import JobSaturation
from .products import METRICS, SaturationCube

LIMITER_WORDS = {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                 "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}


def saturation_context(job, params) -> dict:
    record = JobSaturation.objects.filter(job=job).first()
    context = {"job_saturation": record}
    if record is None or record.status != "ready" or not record.product:
        return context
    path = Path(settings.DATA_DIR) / record.product
    if not path.exists():
        context["saturation_problem"] = "the saturation product file is missing; it is rebuilt at the next scoring"
        return context
    cube = SaturationCube.load(path)
    metric = params.get("smetric") if params.get("smetric") in METRICS else "S"
    sort = params.get("ssort") if params.get("ssort") in SORTS else ("rank" if any(g.get("rank") is not None for g in record.per_gpu) else "node")
    order = heatmap_order(record.per_gpu, sort)
    worst = sorted((g for g in record.per_gpu if g.get("score") is not None), key=lambda g: g["score"])[:10]
    context.update(
        saturation_limiter_words=LIMITER_WORDS.get(record.limiter, record.limiter or "nothing"),
        saturation_metric=metric, saturation_sort=sort, saturation_metrics=[(m, METRIC_TITLES[m]) for m in METRICS],
        saturation_sorts=SORTS, saturation_worst=worst,
        saturation_heatmap=json.loads(heatmap(cube, record.per_gpu, order, metric).to_json()),
        saturation_bands=json.loads(bands(cube).to_json()),
        saturation_scatter=json.loads(utilisation_vs_saturation(record.per_gpu).to_json()),
        saturation_energy_low_share=(100 * record.energy_low_j / record.energy_j) if record.energy_j else None,
        saturation_energy_kwh=(record.energy_j / 3.6e6) if record.energy_j else None,
    )
    return context
