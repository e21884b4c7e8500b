"""The telemetry section of the job page."""
import json
from pathlib import Path

from django.conf import settings

from .fields import FIELDS, lookup
from .figures import gpu_time_heatmap
from .models import JobTelemetry
from .products import JobCube

DEFAULT_HEATMAP_FIELD = 1002  # SM activity: busy SMs, the first thing to look at


def telemetry_context(job, params) -> dict:
    record = JobTelemetry.objects.filter(job=job).first()
    context = {"job_telemetry": record, "telemetry_figure": None, "telemetry_fields": [], "telemetry_field": None}
    if record is None or record.status != "ready" or not record.product:
        return context
    path = Path(settings.DATA_DIR) / record.product
    if not path.exists():
        context["telemetry_problem"] = "the telemetry product file is missing; it is rebuilt at the next refresh"
        return context
    cube = JobCube.load(path)
    available = [int(f) for f in cube.fields]
    wanted = params.get("tfield")
    try:
        field_id = lookup(wanted).id if wanted else DEFAULT_HEATMAP_FIELD
    except KeyError:
        field_id = DEFAULT_HEATMAP_FIELD
    if field_id not in available:
        field_id = DEFAULT_HEATMAP_FIELD if DEFAULT_HEATMAP_FIELD in available else available[0]
    summary = []
    for position, fid in enumerate(available):
        values = cube.mean[:, position, :]
        field = FIELDS.get(fid)
        finite = values[~(values != values)]
        summary.append({"id": fid, "name": field.display_name if field else str(fid), "unit": field.unit if field else "",
                        "meaning": field.meaning if field else "",
                        "mean": float(finite.mean()) if finite.size else None,
                        "min": float(cube.min[:, position, :][cube.count[:, position, :] > 0].min()) if finite.size else None,
                        "max": float(cube.max[:, position, :][cube.count[:, position, :] > 0].max()) if finite.size else None})
    context.update(telemetry_fields=summary, telemetry_field=FIELDS.get(field_id),
                   telemetry_figure=json.loads(gpu_time_heatmap(cube, field_id).to_json()))
    return context
