"""The saturation panel of the job page and the verdict it gives the first screen.

The shell reads the job's row only (the per-GPU list is cached per scoring); figures load after the
first paint: the heatmap from the API (compact), the bands and the utilisation scatter from
``figures`` below. A job without a score says why.

A job whose GPUs report utilisation only (no DCGM profiling fields: the row's labels start with
``scoring.LIMITED_LABEL`` and it has no score) gets a *limited score*: busy time is the headline
instead of S, with clocks, throttling, energy and idle GPUs, what it cannot tell (the limiter) and how
to enable the profiling fields; its heatmap and bands show busy, clock and power metrics.
"""
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from django.conf import settings
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from apps.core.numbers import clock, count, duration_words, z_words
from apps.core.panels import Fact, Finding, PanelSummary
from apps.jobs.products import NOT_STARTED
from apps.telemetry.models import JobTelemetry
from apps.topology.links import job_focus_url

from .figures import LEGEND_ABOVE, band_traces, bands, utilisation_vs_saturation
from .choices import JobSaturationStatusChoices as Status
from .models import JobSaturation
from .products import METRICS, SORTS, SaturationCube
from .selectors import record_warming_up
from .waste import WARMING_UP_WORDS
from .scoring import LIMITED_LABEL
from .stragglers import same_index_pattern

LIMITER_WORDS = {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                 "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}
SORT_WORDS = {"rank": "rank", "node": "node", "pp": "pipeline stage", "dp": "data-parallel replica", "group": "dragonfly group",
              "score": "score (lowest first)"}
TABLE_ROWS = 50  # the per-GPU table on the page: stragglers first, then the least saturated; the download has all
LIGHT_FIELDS = ("id", "job_id", "status", "message", "scoring_since", "computed", "score", "compute", "memory", "link",
                "limiter", "labels", "flags", "idle_gpus", "energy_j", "energy_low_j", "window_start", "window_end",
                "steady_start", "steady_found", "scored_until", "samples", "stragglers", "product", "gpu_model", "step_seconds")
ACTIONS = {
    "tensor": "Close to the tensor-core roof: larger batches or FP8 are what is left.",
    "dram": "Memory-bandwidth bound: fuse kernels, use larger tiles or activation recomputation less.",
    "nvlink": "Bound by NVLink traffic: revisit tensor parallelism (a smaller TP degree moves traffic off the links).",
    "pcie": "Bound by PCIe: data loading or host transfers; pin memory and overlap copies with compute.",
    "c2c": "Bound by the Grace–Hopper link: host offload traffic; keep optimizer states on the GPU if they fit.",
}
# A limited score (utilisation only): the heatmap metrics that have data, the first one the default.
LIMITED_METRICS = ("busy", "clock_factor", "sm_clock", "power", "temperature", "power_capped", "thermal")
LIMITED_SORTS = tuple(sort for sort in SORTS if sort != "score")  # no score to sort by
LIMITED_BANDS = {"busy": "#1f4e79", "clock_factor": "#00798c"}  # the bands figure's metrics and colours
LIMITED_WORDS = "Limited score: these GPUs report utilisation only (no DCGM profiling fields)"
PROFILING_WORDS = "DCGM profiling fields (DCGM_FI_PROF_*, ids 1001–1012, 1076, 1078)"
ENABLE_PROFILING = ("Enable the DCGM profiling metrics: run the collector in the job (srun belvedere-collector.py -- your "
                    "command; deploy/collector/README.md) where DCGM's host engine runs as root, or with --source gpm on "
                    "Hopper, or ask staff to add the DCGM_FI_PROF_* fields to the site's exporter.")


def straggler_links(item: dict, job) -> dict:
    """Where a straggler finding points: its node's page, and the network with this job's nodes shown and
    the lagging ones in focus (the job stays in view), or the group page for a fabric finding."""
    hosts = item.get("hosts") or ([item["host"]] if item.get("host") else [])
    links = {}
    if item.get("host"):
        links["node"] = reverse("topology:node", args=[item["host"]])
    if hosts:
        links["topology"] = job_focus_url(job.nodes or list(job.node_list or []), hosts,
                                          f"{job.cluster.name}/{job.job_id}", label="straggler")
    group = item.get("group")
    if group is None and item.get("level") == "switch" and item.get("switch"):
        head = str(item["switch"]).split(".")[0]
        group = int(head) if re.fullmatch(r"[0-9]{1,9}", head) else None  # not str.isdigit(): "²" is a digit to it
    if group is not None and item.get("level") in ("switch", "group"):
        links["group"] = reverse("topology:group", args=[int(group)])
    return links


def record_for(job, light: bool = True) -> JobSaturation | None:
    rows = JobSaturation.objects.filter(job=job)
    return (rows.only(*LIGHT_FIELDS) if light else rows).first()


def is_limited(record: JobSaturation | None) -> bool:
    """A ready result without S: its GPUs report utilisation only (rows written before limited scores
    existed have no label, only the missing score, and are read the same way)."""
    return (record is not None and record.status == Status.STATUS_READY
            and (LIMITED_LABEL in (record.labels or []) or record.score is None))


def _mean(values) -> float | None:
    values = [float(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None


def limited_numbers(gpus: list[dict]) -> dict:
    """What a limited score says, from the per-GPU list: mean busy fraction over all GPUs and over the
    working ones (busy at least 5 %), and the working GPUs' clock factor and throttled share (fractions;
    None when unknown)."""
    busy = [g.get("busy") for g in gpus if g.get("busy") is not None]
    working = [g for g in gpus if (g.get("busy") or 0) >= 0.05] or gpus  # idle GPUs drop their clocks: not throttling
    return {"busy": _mean(busy), "busy_working": _mean(b for b in busy if b >= 0.05),
            "clock_factor": _mean(g.get("clock_factor") for g in working), "throttled": _mean(g.get("throttled") for g in working),
            "reporting": len(busy)}


def _pct(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.0f} %"


def version(job) -> str | None:
    row = JobSaturation.objects.filter(job=job).values("pk", "computed", "product", "status").first()
    if not row or row["status"] != Status.STATUS_READY:
        return None
    return f"s{row['pk']}-{row['computed'].timestamp() if row['computed'] else 0}-{row['product']}"


def per_gpu(job, record: JobSaturation) -> list[dict]:
    """The per-GPU list of the current scoring, cached by its version (it is large for big jobs)."""
    key = f"saturation:per-gpu:{version(job)}"
    rows = cache.get(key)
    if rows is None:
        rows = JobSaturation.objects.filter(pk=record.pk).values_list("per_gpu", flat=True).first() or []
        cache.set(key, rows, 3600)
    return rows


def why_no_score(job, record: JobSaturation | None) -> str:
    """Why the job has no score, in words: never 'not scored yet' for a job that will never be scored."""
    if job.start_time is None:
        return "The job has not started; it is scored once it runs and GPU telemetry arrives."
    if record is None:
        if job.is_active:
            return ("Not scored yet: running jobs are scored every "
                    f"{duration_words(getattr(settings, 'SATURATION_REFRESH_SECONDS', 600))} once telemetry arrives.")
        if job.end_time and timezone.now() - job.end_time < timedelta(hours=float(settings.TELEMETRY_RECENT_HOURS)) \
                and _telemetry_may_come(job):
            return _not_scored_yet(job)  # its end queued a scoring, and the sweep scores recent jobs
        return ("Not scored: no scoring ran for this job — usually because no GPU telemetry reached the portal for its "
                "nodes and run time (see the data line above).")
    if record.status == Status.STATUS_EMPTY:
        return "Not scored: no GPU telemetry for this job's nodes and run time."
    if record.status == Status.STATUS_FAILED:
        return f"Scoring failed: {record.message or 'no reason recorded'}."
    if record.scoring_since:
        return f"Scoring since {clock(record.scoring_since)}: {record.message or 'reading the telemetry store'}."
    if record.status == Status.STATUS_WAITING:
        if record.message and record.message != NOT_STARTED:  # a reason of its own (a store that was down...)
            return f"Waiting: {record.message}."
        # The job started: a "not started" left from before its start, or a row made by a scoring queued
        # just now, is not a reason (job 1200412 said "has not started" beside complete telemetry).
        return _not_scored_yet(job)
    return record.get_status_display()


def _telemetry_may_come(job) -> bool:
    """Whether a scoring of this finished job can still find telemetry: its telemetry read found samples or is under
    way, or its end is too recent for the read its end queued to have run. A read that found nothing (or none ran
    long after the end) means the job will not be scored: never "not scored yet" for it."""
    status = JobTelemetry.objects.filter(job=job).values_list("status", flat=True).first()
    if status is None:
        return job.end_time is not None and timezone.now() - job.end_time < timedelta(minutes=2)
    return status != "empty"


def _not_scored_yet(job) -> str:
    if job.end_time and not job.is_active:
        return (f"Not scored yet: the job ended at {clock(job.end_time, job.start_time)} "
                f"({duration_words(timezone.now() - job.end_time)} ago); its end queued its scoring, which takes a "
                "few minutes once the telemetry is read.")
    return ("Not scored yet: running jobs are scored every "
            f"{duration_words(getattr(settings, 'SATURATION_REFRESH_SECONDS', 600))} once telemetry arrives.")


def context(job, request) -> dict:
    record = record_for(job)
    result = {"job_saturation": record, "saturation_warming_up": bool(record is not None and record_warming_up(job, record))}
    if record is None or record.status != Status.STATUS_READY or not record.product:
        result["saturation_reason"] = why_no_score(job, record)
        return result
    if not (Path(settings.DATA_DIR) / record.product).exists():
        result["saturation_problem"] = "the saturation product file is missing; it is rebuilt at the next scoring"
        return result
    gpus = per_gpu(job, record)
    limited = is_limited(record)
    has_ranks = any(g.get("rank") is not None for g in gpus[:64])
    metrics = {name: METRICS[name] for name in (LIMITED_METRICS if limited else METRICS)}
    sorts = LIMITED_SORTS if limited else SORTS
    metric = request.GET.get("smetric") if request.GET.get("smetric") in metrics else next(iter(metrics))
    sort = request.GET.get("ssort") if request.GET.get("ssort") in sorts else ("rank" if has_ranks else "node")
    mode = "deviation" if request.GET.get("smode") == "deviation" else "value"
    if limited:  # stragglers first, then the least busy
        table = sorted(gpus, key=lambda g: (not g.get("straggler"), g.get("busy") is None, g.get("busy") or 0))
    else:
        table = sorted(gpus, key=lambda g: (not g.get("straggler"), g["score"] is None, g["score"] or 0))
    args = [job.cluster.name, job.job_id]
    energy_low = record.energy_low_j
    result.update(
        saturation_limited=limited,
        saturation_limiter_words=LIMITER_WORDS.get(record.limiter, record.limiter or "nothing"),
        saturation_metric=metric, saturation_sort=sort, saturation_mode=mode,
        saturation_metrics=[(name, m.title + (f" ({m.unit})" if m.unit else "")) for name, m in metrics.items()],
        saturation_sorts=[(value, SORT_WORDS[value]) for value in sorts],
        saturation_table=table[:TABLE_ROWS], saturation_table_more=max(0, len(table) - TABLE_ROWS),
        saturation_gpus=len(gpus),
        saturation_stragglers=[{**item, "links": straggler_links(item, job), "z_words": z_words(item.get("z"))}
                               for item in record.stragglers],
        saturation_energy_low_share=(100 * energy_low / record.energy_j) if record.energy_j and energy_low is not None else None,
        saturation_energy_kwh=(record.energy_j / 3.6e6) if record.energy_j else None,
        saturation_png_name=f"saturation-{job.cluster.name}-{job.job_id}",
        saturation_heatmap_url=reverse("saturation-api:heatmap", args=args),
        saturation_series_url=reverse("saturation-api:series", args=args),
        saturation_figure_url=reverse("jobs:panel-figure", args=[*args, "saturation", "NAME"]),
        saturation_samples_words=count(record.samples, "sample"),
    )
    if limited:
        numbers = limited_numbers(gpus)
        result.update(saturation_limited_words=LIMITED_WORDS, saturation_profiling_words=PROFILING_WORDS,
                      saturation_enable_profiling=ENABLE_PROFILING,
                      saturation_busy=_pct(numbers["busy"]), saturation_busy_working=_pct(numbers["busy_working"]),
                      saturation_clock=_pct(numbers["clock_factor"]), saturation_throttled=_pct(numbers["throttled"]),
                      saturation_working_gpus=len(gpus) - (record.idle_gpus or 0),
                      # what else the labels say (idle GPUs, held-down clocks), the limited label and "idle" aside
                      saturation_limited_labels=[label for label in record.labels or [] if label not in (LIMITED_LABEL, "idle")])
    return result


def _straggler_finding(job, item: dict) -> Finding:
    where = f"{item['host']}:{item['gpu']}" if item.get("gpu") is not None else (item.get("host") or item.get("switch") or "?")
    rank = f" (rank {item['rank']})" if item.get("rank") is not None else ""
    level = item.get("level", "gpu")
    what = {"gpu": f"GPU {where}{rank}", "node": f"Node {item.get('host')}", "switch": f"Switch {item.get('switch')}",
            "group": f"Dragonfly group {item.get('group')}"}.get(level, where)
    lasting = f" for {duration_words(item.get('duration_s'))}" if item.get("duration_s") else ""
    title = f"{what} lags its peers on {item.get('signal', '?')}: {z_words(item.get('z'))}{lasting}."
    if item.get("cause"):
        title = title[:-1] + f" — {item['cause']}."
    hosts = item.get("hosts") or ([item["host"]] if item.get("host") else [])
    if level == "nic":  # the reason says it all: "hsn2 on nid000473: 31 % of packets retried, its peers < 1 %"
        title = f"Network: {item.get('reason') or 'a NIC retries far more than its peers'}."
        action = (f"Staff: check {item.get('nic')} on {item.get('host')} (cable, switch port, retry handler); the job's "
                  f"collectives wait for it: resubmit with --exclude={item.get('host')}.")
        return Finding("warning", title, action, "#stragglers", "saturation")
    if level in ("gpu", "node") and hosts:
        action = f"The whole job waits for it: resubmit with --exclude={','.join(hosts[:8])} and report the node to staff."
    else:
        action = "Staff: check the switch's links and error counters; resubmitting elsewhere avoids it."
    return Finding("critical" if level in ("gpu", "node") else "warning", title, action, "#stragglers", "saturation")


def summary(job) -> PanelSummary | None:
    if job.start_time is None:
        return None
    record = record_for(job)
    part = PanelSummary()
    if record is None or record.status != Status.STATUS_READY:
        reason = why_no_score(job, record)
        part.facts.append(Fact("Saturation", "no score", reason, "info", "fact-saturation"))
        return part
    if record_warming_up(job, record):
        # No verdict before the steady state is known (issue 35): the score so far is the warm-up's.
        part.facts.append(Fact("Saturation", "warming up", f"{WARMING_UP_WORDS}; {_freshness(record)}", "info",
                               "fact-saturation"))
        return part
    if is_limited(record):
        return _limited_summary(job, record, part)
    limiter = LIMITER_WORDS.get(record.limiter, record.limiter or "nothing")
    part.facts.append(Fact("Saturation", f"{record.score:.0f} of 100", f"limited by {limiter}; {_freshness(record)}",
                           "ok" if (record.score or 0) >= 50 else "warning", "fact-saturation"))
    idle = _common_findings(job, record, part)
    score = record.score
    if score is not None and score >= 60 and record.limiter in ACTIONS:
        # Near a roof: what is left is to make that unit do more per step.
        part.findings.append(Finding("info", f"Saturation {score:.0f} of 100, limited most of the time by {limiter}.",
                                     ACTIONS[record.limiter], "#panel-saturation", "saturation"))
    elif score is not None and score < 30:
        why = f"{idle:,} idle GPU{'s' * (idle != 1)} pull it down; " if idle else ""
        part.findings.append(Finding("warning", f"Saturation {score:.0f} of 100: far from every roof "
                                     f"({why}{', '.join(label for label in record.labels[:2] if 'idle' not in label) or 'no unit is busy'}).",
                                     "Profile one step (nsys) to see where the time goes: data loading, communication "
                                     "or small kernels.", "#panel-saturation", "saturation"))
    elif score is not None:
        part.findings.append(Finding("info", f"Saturation {score:.0f} of 100: the busiest unit, {limiter}, runs at about "
                                     f"{score:.0f} % of what it can sustain.",
                                     "Profile one step (nsys) to see what holds the rest back.", "#panel-saturation",
                                     "saturation"))
    return part


def _freshness(record: JobSaturation) -> str:
    return f"scored {clock(record.computed)} ({duration_words(timezone.now() - record.computed)} ago)" if record.computed else ""


def _common_findings(job, record: JobSaturation, part: PanelSummary) -> int:
    """Idle GPUs, stragglers and held-down clocks: said the same with or without S. Returns the idle count."""
    gpus_total = job.gpus or None
    idle = record.idle_gpus or 0
    part.facts.append(Fact("Idle GPUs", f"{idle:,}" + (f" of {gpus_total:,}" if gpus_total else ""),
                           "busy less than 5 % of the steady state", "warning" if idle else "ok", "fact-idle"))
    part.facts.append(Fact("Stragglers", f"{len(record.stragglers):,}", "GPUs, nodes or switches lagging their peers",
                           "critical" if record.stragglers else "ok", "fact-stragglers"))
    # The same GPU index lagging on (nearly) every node is one binding finding, not an --exclude of every node.
    nodes = job.node_count or len(job.node_list or []) or len({g.get("host") for g in record.per_gpu or []})
    patterns = same_index_pattern(record.stragglers, nodes)
    for pattern in patterns:
        part.findings.append(_binding_finding(pattern, nodes))
    patterned = {id(item) for pattern in patterns for item in pattern["items"]}
    rest = [item for item in record.stragglers if id(item) not in patterned]
    for item in rest[:5]:
        part.findings.append(_straggler_finding(job, item))
    if len(rest) > 5:
        part.findings.append(Finding("warning", f"{len(rest) - 5:,} more straggler findings.", "See them all below.",
                                     "#stragglers", "saturation"))
    if idle:
        part.findings.append(Finding("warning", f"{idle:,} GPU{'s' * (idle > 1)} idle in the steady state"
                                     + (f" of {gpus_total:,}" if gpus_total else "") + ": allocated but doing nothing.",
                                     "Check that every GPU gets a rank (tasks per node × GPUs per task, CUDA_VISIBLE_DEVICES).",
                                     "#panel-saturation", "saturation"))
    if "silent GPUs" in (record.flags or []):
        finding = silent_finding(job, per_gpu(job, record))
        if finding is not None:
            part.findings.append(finding)
    throttled = [label for label in record.labels if "clock-limited" in label or "thermal" in label or "power" in label]
    if throttled:
        part.findings.append(Finding("warning", f"Clocks held down: {throttled[0]}.",
                                     "Staff: check cooling and power capping on these nodes; the job loses speed it paid for.",
                                     "#panel-saturation", "saturation"))
    return idle


def _binding_finding(pattern: dict, nodes: int) -> Finding:
    """GPU k lagging on every node (or most): how local rank k is bound, not which nodes the job got."""
    index, hosts = pattern["gpu"], pattern["hosts"]
    where = f"every one of the job's {nodes:,} nodes" if len(hosts) >= nodes else f"{len(hosts):,} of the job's {nodes:,} nodes"
    signals = ", ".join(pattern["signals"]) or "its signals"
    title = (f"GPU {index} lags its peers on {where} ({signals}): the same GPU index everywhere is a binding or affinity "
             f"pattern, not {len(hosts):,} bad nodes.")
    action = (f"Check how local rank {index} is bound, not the nodes: its CPU and NIC affinity (srun --cpu-bind; which NUMA "
              f"node GPU {index} and hsn{index} sit on: nvidia-smi topo -m), the NUMA binding of its process, and the rank "
              f"to GPU mapping (CUDA_VISIBLE_DEVICES, --gpu-bind, LOCAL_RANK). Excluding these nodes would not help: "
              f"every node has a GPU {index}.")
    return Finding("critical", title, action, "#stragglers", "saturation")


def silent_finding(job, gpus: list[dict]) -> Finding | None:
    """GPUs whose samples stopped while the job ran on (``silent_from``, written by the scoring): which ones, from
    when. Critical when half the job's GPUs or more fell silent: the rest of the page then speaks for few of them."""
    silent = [g for g in gpus if g.get("silent_from")]
    if not silent:
        return None
    try:
        first = min(datetime.fromisoformat(g["silent_from"]) for g in silent)
    except (TypeError, ValueError):
        return None
    total = job.gpus or len(gpus)
    hosts: dict[str, list[int]] = {}
    for g in silent:
        hosts.setdefault(g["host"], []).append(int(g["gpu"]))
    where = ", ".join(f"{host}:{','.join(str(i) for i in sorted(indexes))}" for host, indexes in list(hosts.items())[:6])
    where += f" and {len(hosts) - 6:,} more nodes" if len(hosts) > 6 else ""
    end = job.end_time if job.end_time and not job.is_active else None
    before = f", {duration_words(end - first)} before the job ended" if end and end > first else " while the job runs"
    title = (f"{len(silent):,} of {total:,} GPUs stopped sending telemetry from {clock(first, job.start_time)}{before}: "
             f"{where}. The score and findings after that speak only for the GPUs still reporting.")
    action = ("Check these nodes: a GPU that falls silent mid-job has often failed (an XID error, fallen off the bus) or its "
              "collector died; see the job's error output, then the vetting panel. Staff: check DCGM on them.")
    return Finding("critical" if 2 * len(silent) >= total else "warning", title, action, "#panel-saturation", "saturation")


def _limited_summary(job, record: JobSaturation, part: PanelSummary) -> PanelSummary:
    """The first screen of a limited score: busy time as the headline, what can be said (clocks, idle GPUs,
    stragglers on busy, clock, power and temperature), what cannot (the limiter) and how to get S."""
    numbers = limited_numbers(per_gpu(job, record))
    busy, working = numbers["busy"], numbers["busy_working"]
    part.facts.append(Fact("Busy time (limited score)", _pct(busy), f"{LIMITED_WORDS}; {_freshness(record)}".rstrip("; "),
                           "info", "fact-saturation"))
    if numbers["clock_factor"] is not None:
        throttled = numbers["throttled"] or 0.0
        part.facts.append(Fact("SM clock", f"{_pct(numbers['clock_factor'])} of max",
                               f"power- or thermal-throttled {_pct(throttled)} of the time",
                               "warning" if throttled > 0.1 else "ok", "fact-clock"))
    idle = _common_findings(job, record, part)
    part.findings.append(Finding(
        "info", f"{LIMITED_WORDS}: busy {_pct(busy)} of the steady state, but whether compute, memory bandwidth or the "
                "links limit the job cannot be told without them.", ENABLE_PROFILING, "#saturation-limited", "saturation"))
    if working is not None and working < 0.5:
        who = "The working GPUs were" if idle else "The GPUs were"
        part.findings.append(Finding("warning", f"{who} busy only {_pct(working)} of the steady state: for most of the "
                                     "time no kernel ran.", "Profile one step (nsys) to see what the GPUs wait for: data "
                                     "loading, communication or host work.", "#panel-saturation", "saturation"))
    return part


def _cube(job, metrics):
    record = record_for(job)
    if record is None or record.status != Status.STATUS_READY or not record.product:
        return None, None
    path = Path(settings.DATA_DIR) / record.product
    return (SaturationCube.load(path, metrics), record) if path.exists() else (None, record)


def bands_figure(job, query) -> dict:
    if is_limited(record_for(job)):
        cube, _ = _cube(job, set(LIMITED_BANDS))
        return {} if cube is None else json.loads(limited_bands(cube).to_json())
    cube, _ = _cube(job, {"S", "C", "M", "L"})
    return {} if cube is None else json.loads(bands(cube).to_json())



def limited_bands(cube: SaturationCube):
    """The bands of a limited score: median GPU and 10-90 % band of the busy fraction (shown) and of the SM
    clock factor (in the legend), both fractions 0..1. (Throttling has its heatmaps.)"""
    figure = go.Figure()
    times = [str(np.datetime_as_string(t, unit="s")) + "Z" for t in cube.bin_starts]
    for metric, colour in LIMITED_BANDS.items():
        values = cube.values.get(metric)
        if values is None or not np.isfinite(values).any():
            continue
        with np.errstate(all="ignore"):
            low, mid, high = (np.nanpercentile(values.astype(float), q, axis=0) for q in (10, 50, 90))
        name, visible = METRICS[metric].title, True if metric == "busy" else "legendonly"
        for trace in band_traces(times, low, high, colour, f"{name}: 10-90 %", metric, visible, 0.3):
            figure.add_trace(trace)
        figure.add_trace(go.Scatter(x=times, y=mid.tolist(), line={"color": colour, "width": 2}, name=f"{name}: median",
                                    legendgroup=metric, visible=visible,
                                    hovertemplate="median %{y:.3f}<extra>" + name + "</extra>"))
    shapes = []
    if cube.warmup_end is not None and times and cube.warmup_end > cube.bin_starts[0]:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": times[0],
                       "x1": str(np.datetime_as_string(cube.warmup_end, unit="s")) + "Z", "y0": 0, "y1": 1,
                       "fillcolor": "rgba(120,120,120,0.12)", "line": {"width": 0}})
    figure.update_layout(margin={"l": 50, "r": 10, "t": 10, "b": 40}, height=360, yaxis={"range": [0, 1.02], "title": "fraction"},
                         legend=LEGEND_ABOVE, plot_bgcolor="white", hovermode="x unified", shapes=shapes, template="none")
    return figure


def scatter_figure(job, query) -> dict:
    record = record_for(job)
    if record is None or record.status != Status.STATUS_READY:
        return {}
    return json.loads(utilisation_vs_saturation(per_gpu(job, record)).to_json())


FIGURES = {"bands": bands_figure, "scatter": scatter_figure}
