"""The saturation section of the job page: it reads the job's row and product, never scores."""
import json
import re
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse

from .figures import bands, heatmap, utilisation_vs_saturation
from .models import JobSaturation
from .products import METRICS, SORTS, SaturationCube, heatmap_order

LIMITER_WORDS = {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                 "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}
SORT_WORDS = {"rank": "rank", "node": "node", "pp": "pipeline stage", "dp": "data-parallel replica", "group": "dragonfly group",
              "score": "score (lowest first)"}
TABLE_ROWS = 512  # the per-GPU table on the page; the download has every GPU


def straggler_links(item: dict, job_nodes: list[str]) -> dict:
    """Where a straggler finding points on the topology: the node page, and the whole machine with the
    lagging nodes highlighted (or the group page for a fabric finding)."""
    hosts = item.get("hosts") or ([item["host"]] if item.get("host") else [])
    links = {}
    if item.get("host"):
        links["node"] = reverse("topology:node", args=[item["host"]])
    if hosts:
        links["topology"] = reverse("topology:index") + "?" + urlencode({"nodes": ",".join(hosts)})
    if item.get("group") is not None and item.get("level") in ("switch", "group"):
        links["group"] = reverse("topology:group", args=[item["group"]])
    elif item.get("level") == "switch" and item.get("switch"):
        group = str(item["switch"]).split(".")[0]
        if re.fullmatch(r"[0-9]{1,9}", group):  # not str.isdigit(): "²" is a digit to it
            links["group"] = reverse("topology:group", args=[int(group)])
    return links


def saturation_context(job, params) -> dict:
    record = JobSaturation.objects.filter(job=job).first()
    context = {"job_saturation": record}
    if record is None or record.status != "ready" or not record.product:
        return context
    path = Path(settings.DATA_DIR) / record.product
    if not path.exists():
        context["saturation_problem"] = "the saturation product file is missing; it is rebuilt at the next scoring"
        return context
    metric = params.get("smetric") if params.get("smetric") in METRICS else "S"
    has_ranks = any(g.get("rank") is not None for g in record.per_gpu)
    sort = params.get("ssort") if params.get("ssort") in SORTS else ("rank" if has_ranks else "node")
    cube = SaturationCube.load(path, {metric, "S", "C", "M", "L"})
    if metric not in cube.values:
        context["saturation_problem"] = f"this job's product predates the {METRICS[metric].title} view; it is rebuilt at the next scoring"
        return context
    available = SaturationCube.metrics_in(path)
    order = heatmap_order(record.per_gpu, sort)
    table = sorted(record.per_gpu, key=lambda g: (not g.get("straggler"), g["score"] is None, g["score"] or 0))
    stragglers = [{**item, "links": straggler_links(item, job.node_list)} for item in record.stragglers]
    context.update(
        saturation_limiter_words=LIMITER_WORDS.get(record.limiter, record.limiter or "nothing"),
        saturation_metric=metric, saturation_sort=sort,
        saturation_metrics=[(name, m.title + (f" ({m.unit})" if m.unit else "")) for name, m in METRICS.items() if name in available],
        saturation_sorts=[(value, SORT_WORDS[value]) for value in SORTS], saturation_table=table[:TABLE_ROWS],
        saturation_table_more=max(0, len(table) - TABLE_ROWS), saturation_stragglers=stragglers,
        saturation_heatmap=json.loads(heatmap(cube, record.per_gpu, order, metric).to_json()),
        saturation_bands=json.loads(bands(cube).to_json()),
        saturation_scatter=json.loads(utilisation_vs_saturation(record.per_gpu).to_json()),
        saturation_energy_low_share=(100 * record.energy_low_j / record.energy_j) if record.energy_j else None,
        saturation_energy_kwh=(record.energy_j / 3.6e6) if record.energy_j else None,
        saturation_png_name=f"saturation-{job.cluster.name}-{job.job_id}",
    )
    return context
