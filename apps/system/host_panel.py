"""The job page's "Host" panel (issue 39): the CPU side of the job's nodes.

* **First screen** (:func:`summary`): page cache held in GPU memory on the job's nodes, before the job (the hour
  before it started) and during it, from ``HOST_PAGE_CACHE_GPU_GB`` on ("page cache holds 23 GB of GPU memory on
  nid001234 GPU 1"), and host memory pressure or swapping during the job (``apps/telemetry/host_analysis.py``).
  The host-bound finding ("GPUs wait on the host: ...") is the appmetrics panel's: it needs the iterations.
* **The section**: those sentences, the mean CPU busy, data-loader CPU and host memory of the run, and each node's
  own history page (``/nodes/<host>/``).

Reads the host samples of the job's nodes (``apps.telemetry.selectors.job_host_samples``), cached per job state for
``LIVE_TTL`` seconds while it runs and ``DONE_TTL`` after.
"""
from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from apps.core.panels import Fact, Finding, JobPanel, PanelSummary, register_job_panel
from apps.telemetry import host_analysis
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.selectors import job_host_samples

KEY = "host"
LIVE_TTL, DONE_TTL = 30, 6 * 3600
BEFORE = timedelta(hours=1)
FIELDS = ("host_cpu_busy", "host_mem_used", "host_mem_total", "host_dataloader_cpu", "host_gpu_page_cache",
          "host_mem_pressure", "host_swap_out_pages")
PAGE_CACHE_ACTION = ("Page cache in GPU memory leaves the ranks less of it (out-of-memory errors scattered across ranks): "
                     "drop it before the job (echo 1 > /proc/sys/vm/drop_caches in the prolog) and tell staff if it "
                     "comes back during the job.")
PRESSURE_ACTION = "The node ran short of host memory: fewer data-loader workers or smaller prefetch buffers, or more nodes."
NODE_LINKS_MAX = 64


def _mean(frame, domain_prefix: str, field: str) -> float | None:
    rows = frame[(frame["field"] == field) & frame["domain"].str.startswith(domain_prefix)]["value"]
    return float(rows.mean()) if len(rows) else None


def host_numbers(job) -> dict:
    """The panel's numbers: findings' sentences and the run's means (cached under the job's state)."""
    key = "host:job:" + hashlib.sha256(f"{job.pk}|{job.state}|{job.start_time}|{job.end_time}".encode()).hexdigest()
    found = cache.get(key)
    if found is not None:
        return found
    threshold = float(getattr(settings, "HOST_PAGE_CACHE_GPU_GB", 4.0)) * 1e9
    frame = job_host_samples(job, fields=FIELDS, margin=BEFORE)
    found = {"samples": int(len(frame)), "page_cache": [], "pressure": [], "means": {}}
    if len(frame):
        start = np.datetime64(job.start_time.replace(tzinfo=None), "ns")
        stamps = frame["ts"].dt.tz_convert(None).to_numpy("datetime64[ns]")
        before, during = frame[stamps < start], frame[stamps >= start]
        found["page_cache"] = (host_analysis.page_cache_in_gpu(before, threshold, "before the job")
                               + host_analysis.page_cache_in_gpu(during, threshold, "during the job"))
        found["pressure"] = host_analysis.memory_pressure(during)
        used, total = _mean(during, "node", "host_mem_used"), _mean(during, "node", "host_mem_total")
        found["means"] = {"cpu_busy": _mean(during, "node", "host_cpu_busy"),
                          "loader_cpu": _mean(during, "job", "host_dataloader_cpu"),
                          "mem_used": used / total if used is not None and total else None}
    cache.set(key, found, LIVE_TTL if job.is_active else DONE_TTL)
    return found


def summary(job) -> PanelSummary | None:
    if job.start_time is None or not job.node_list:
        return None
    try:
        numbers = host_numbers(job)
    except TelemetryUnavailable:
        return None
    if not numbers["samples"]:
        return None
    part = PanelSummary()
    means = numbers["means"]
    if means.get("cpu_busy") is not None:
        loader = means.get("loader_cpu")
        part.facts.append(Fact("Host CPU", f"{round(100 * means['cpu_busy'])} % busy",
                               (f"data-loader workers at {round(100 * loader)} % of their CPUs; " if loader is not None else "")
                               + (f"host memory {round(100 * means['mem_used'])} % used" if means.get("mem_used") is not None
                                  else "host memory unknown"), "info", "fact-host", rank=46))
    for item in numbers["page_cache"][:4]:
        part.findings.append(Finding("warning", item["sentence"][0].upper() + item["sentence"][1:] + ".", PAGE_CACHE_ACTION,
                                     "#panel-host", KEY))
    for item in numbers["pressure"][:4]:
        part.findings.append(Finding("warning", item["sentence"][0].upper() + item["sentence"][1:] + ".", PRESSURE_ACTION,
                                     "#panel-host", KEY))
    part.data["host"] = {"page_cache": numbers["page_cache"], "pressure": numbers["pressure"], "means": means}
    return part


def context(job, request) -> dict:
    nodes = list(job.node_list or [])
    result = {"host_nodes": [(host, reverse("nodes:detail", args=[host])) for host in nodes[:NODE_LINKS_MAX]],
              "host_more_nodes": max(0, len(nodes) - NODE_LINKS_MAX), "host_threshold_gb": settings.HOST_PAGE_CACHE_GPU_GB}
    if job.start_time is None:
        result["host_reason"] = "The job has not started: its nodes' host side appears here once it runs."
        return result
    try:
        numbers = host_numbers(job)
    except TelemetryUnavailable as exc:
        result["host_reason"] = f"The telemetry store cannot be read now: {exc}"
        return result
    means = numbers["means"]
    result.update(host=numbers, host_cpu=_percent(means.get("cpu_busy")), host_loader=_percent(means.get("loader_cpu")),
                  host_memory=_percent(means.get("mem_used")))
    return result


def _percent(value) -> str:
    return "–" if value is None else f"{round(100 * value)} %"


def register() -> None:
    # After the job in context (35): the nodes' CPU side, and each node's own history.
    register_job_panel(JobPanel(key=KEY, title="Host", order=36, template="system/_panel_host.html",
                                context=context, summary=summary))
