"""The job page's "Storage" panel: what the job read and wrote on Lustre, its checkpoint bursts, and what its GPUs did
meanwhile.

* **First screen** (:func:`summary`): the verdict on the checkpoints ("Checkpoints: 5 bursts of ~2.4 TB every 30 min,
  writing at 31 GB/s; GPUs idle 90 s each") with what to do, and the freshness of the job's Lustre readings.
  Cached (:func:`storage`) under the job's state for :data:`LIVE_TTL` seconds while it runs.
* **The figure** (:func:`storage_figure`, ``panels/storage/io.json``): subplots on one shared time axis — write and
  read rates, metadata operations, the mean SM activity of the job's GPUs from its telemetry cube and the job's
  tokens/s when it logs them — every write burst shaded on every subplot, so a checkpoint's burst sits over its
  GPU-idle dip and its throughput dip. Redrawn in place (``Plotly.react``, ``uirevision``) while the job runs.
* **No statistics**: the panel says what to enable (``jobid_var``) and how to send readings instead of an empty plot.
"""
from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.cache import cache
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from apps.core.numbers import clock, duration_words
from apps.core.panels import Fact, Finding, Freshness, PanelSummary
from apps.telemetry.backends.base import TelemetryUnavailable

from . import selectors
from .bursts import human_bytes

KEY = "storage"
LIVE_TTL = 30
DONE_TTL = 6 * 3600
ACTION = ("Expected while a checkpoint is written; if the pauses cost too much, save asynchronously (Megatron-LM "
          "--async-save, torch.distributed.checkpoint async_save) or less often, and stripe the checkpoint directory "
          "over more OSTs (lfs setstripe -c -1).")
BURST_FILL = "rgba(209,73,91,0.13)"
COLOURS = {"write": "#d1495b", "read": "#1f4e79", "meta": "#00798c", "gpu": "#30343b", "tokens": "#8e5ea2"}


def _recently_ended(job) -> bool:
    return job.end_time is not None and timezone.now() - job.end_time < timedelta(hours=1)


def _live(job) -> bool:
    return job.is_active or _recently_ended(job)


def storage(job) -> dict:
    """``selectors.job_storage(job)`` cached briefly (the first screen reads it on every page view)."""
    key = "storage:job:" + hashlib.sha256(f"{job.pk}|{job.state}|{job.start_time}|{job.end_time}".encode()).hexdigest()
    found = cache.get(key)
    if found is None:
        found = selectors.job_storage(job)
        cache.set(key, found, LIVE_TTL if _live(job) else DONE_TTL)
    return found


def version(job) -> str | None:
    """No ETag while readings may still arrive; a finished job's figure is keyed by its rows' span."""
    if job.start_time is None or _live(job):
        return None
    coverage = storage(job).get("coverage") or {}
    return "s" + hashlib.sha256(f"{job.pk}|{coverage}".encode()).hexdigest()[:20]


def freshness(job, coverage: dict | None) -> Freshness | None:
    if not coverage:
        return None
    first, last = pd.Timestamp(coverage["first"]).to_pydatetime(), pd.Timestamp(coverage["last"]).to_pydatetime()
    now = timezone.now()
    span = f"{coverage.get('readings', 0):,} readings from {clock(first, now)} to {clock(last, now)}"
    if job.is_active:
        late = (now - last).total_seconds()
        state = "live" if late <= 300 else "lagging" if late <= 1800 else "stale"
        words = f"Lustre job stats: {span}, the last {duration_words(late)} ago."
    else:
        short = ((job.end_time or now) - last).total_seconds()
        state = "complete" if short <= 900 else "ends early"
        words = f"Lustre job stats: {span}." + ("" if state == "complete" else f" The last {duration_words(short)} before the job ended.")
    return Freshness("Lustre job stats", first, last, state, words)


def summary(job) -> PanelSummary | None:
    """The checkpoint verdict and the readings' freshness; nothing for a job without Lustre statistics."""
    if job.start_time is None:
        return None
    try:
        numbers = storage(job)
    except TelemetryUnavailable:
        return None
    if not numbers.get("coverage"):
        return None
    part = PanelSummary()
    totals = numbers.get("totals") or {}
    part.facts.append(Fact("File system", f"{human_bytes(totals.get('write_bytes'))} written",
                           f"{human_bytes(totals.get('read_bytes'))} read, {int(totals.get('metadata_ops') or 0):,} metadata "
                           f"operations on {len(numbers.get('targets') or [])} Lustre targets", "info", "fact-storage", rank=45))
    if numbers.get("verdict"):
        part.findings.append(Finding("info", numbers["verdict"] + ".", ACTION, "#storage-figure", KEY))
    fresh = freshness(job, numbers.get("coverage"))
    if fresh is not None:
        part.freshness.append(fresh)
    return part


def _url(name: str, *args) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def context(job, request) -> dict:
    args = [job.cluster.name, job.job_id]
    api = _url("storage-api:storage", *args) or f"/api/v1/jobs/{job.cluster.name}/{job.job_id}/storage/"
    import_url = request.build_absolute_uri("/api/v1/telemetry/import/")
    result = {"storage_api_url": api, "storage_figure_url": reverse("jobs:panel-figure", args=[*args, KEY, "io"]),
              "storage_live_seconds": settings.JOB_PAGE_LIVE_SECONDS, "storage_import_url": import_url}
    if job.start_time is None:
        result["storage_reason"] = "The job has not started: its file-system activity appears here once it runs."
        return result
    try:
        numbers = storage(job)
    except TelemetryUnavailable as exc:
        result["storage_reason"] = f"The telemetry store cannot be read now: {exc}"
        return result
    totals = numbers.get("totals") or {}
    result.update(storage=numbers, storage_has_stats=bool(numbers.get("coverage")),
                  storage_freshness=freshness(job, numbers.get("coverage")),
                  storage_written=human_bytes(totals.get("write_bytes")), storage_read=human_bytes(totals.get("read_bytes")),
                  storage_meta=f"{int(totals.get('metadata_ops') or 0):,}",
                  storage_bursts=[{**burst, "size": human_bytes(burst["write_bytes"]),
                                   "rate": human_bytes(burst["peak_rate"], per_s=True),
                                   "at": clock(pd.Timestamp(burst["start"]).to_pydatetime(), timezone.now()),
                                   "idle": (f"{burst['gpu_idle_s']:.0f} s" if burst.get("gpu_idle_s") is not None else "no GPU telemetry")}
                                  for burst in numbers.get("bursts") or []])
    return result


# ---------------------------------------------------------------- the figure

def _line(x, y, name, colour, hover, **extra) -> dict:
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "line": {"color": colour, "width": 1.5},
            "hovertemplate": hover + "<extra></extra>", **extra}


def _broken(times, values) -> tuple[list, list]:
    """ISO times and values with a break (None) where nothing was logged for more than three usual intervals: a line
    across the silence would draw a ramp that never happened."""
    times = np.asarray(times, dtype="datetime64[ns]")
    stamps, out = selectors._iso(times), list(values)
    if len(times) < 3:
        return stamps, out
    gaps = np.diff(times.astype("int64"))
    limit = 3 * float(np.median(gaps))
    x, y = [stamps[0]], [out[0]]
    for i in range(1, len(times)):
        if gaps[i - 1] > limit:
            x.append(stamps[i - 1])
            y.append(None)
        x.append(stamps[i])
        y.append(out[i])
    return x, y


def storage_figure(job, query) -> dict:
    """Plotly JSON: rates, metadata ops, GPU activity and tokens/s on one time axis, bursts shaded on each."""
    numbers = selectors.job_storage(job)
    body = {"coverage": numbers.get("coverage"), "bursts": numbers.get("bursts") or [], "verdict": numbers.get("verdict", ""),
            "step": numbers.get("step"), "step_note": numbers.get("step_note", "")}
    if not numbers.get("coverage"):
        return {**body, "data": [], "layout": {}, "reason": "no Lustre job statistics for this job"}
    series = numbers["series"]
    x = series["time"]
    gb = lambda values: [None if v is None else round(v / 1e9, 4) for v in values]  # noqa: E731
    rows = [("GB/s", [_line(x, gb(series["write_bytes"]), "write", COLOURS["write"], "%{y:.3~g} GB/s written"),
                      _line(x, gb(series["read_bytes"]), "read", COLOURS["read"], "%{y:.3~g} GB/s read")]),
            ("metadata ops/s", [_line(x, series["metadata_ops"], "metadata ops", COLOURS["meta"], "%{y:,.1f} metadata ops/s")])]
    gpu = selectors.gpu_activity(job)
    if gpu is not None:
        values = [None if not np.isfinite(v) else round(float(v), 4) for v in gpu["activity"]]
        rows.append(("GPU activity", [_line(selectors._iso(gpu["time"]), values,
                                            f"{gpu['name']} (mean of {gpu['gpus']:,} GPUs per {gpu['step']} s)",
                                            COLOURS["gpu"], "%{y:.0%} " + gpu["name"], meta={"gpu": True, "step": gpu["step"]})]))
    coverage = numbers["coverage"]
    tokens = selectors.tokens_per_s(job, start=pd.Timestamp(coverage["first"]).to_pydatetime() - timedelta(minutes=5))
    if len(tokens):
        x, y = _broken(tokens["ts"].dt.tz_convert(None).to_numpy("datetime64[ns]"), tokens["value"].round(1).tolist())
        rows.append(("tokens/s", [_line(x, y, "tokens/s", COLOURS["tokens"], "%{y:,.0f} tokens/s")]))
    body.update(_layout(rows, body["bursts"], gpu_axis=gpu is not None))
    if body["step_note"]:  # the readings span more than the grid's cap allows at the usual step: say so on the figure
        body["layout"]["annotations"].append({"text": body["step_note"], "xref": "paper", "yref": "paper", "x": 0, "y": 1.0,
                                              "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                                              "font": {"size": 11, "color": "#8a5a00"}})
    return body


def _layout(rows, bursts, gpu_axis: bool) -> dict:
    gap = 0.05
    n = len(rows)
    each = (1.0 - gap * (n - 1)) / n
    data, layout = [], {"height": 170 * n + 90, "margin": {"l": 70, "r": 20, "t": 10, "b": 40}, "plot_bgcolor": "white",
                        "hovermode": "x", "showlegend": True, "uirevision": KEY, "shapes": [], "annotations": [],
                        "legend": {"orientation": "h", "y": -0.08, "yanchor": "top", "font": {"size": 11}}}
    for index, (title, traces) in enumerate(rows):
        top = 1.0 - index * (each + gap)
        suffix = "" if index == 0 else str(index + 1)
        layout[f"yaxis{suffix}"] = {"domain": [max(0.0, top - each), top], "title": {"text": title, "font": {"size": 11}},
                                    "zeroline": False, "gridcolor": "#eceff3", "automargin": True, "rangemode": "tozero"}
        if title == "GPU activity" and gpu_axis:
            layout[f"yaxis{suffix}"].update(range=[0, 1.02], tickformat=".0%")
        layout[f"xaxis{suffix}"] = {"type": "date", "anchor": f"y{suffix}", "gridcolor": "#eceff3",
                                    "showticklabels": index == n - 1, **({} if index == 0 else {"matches": "x"})}
        for trace in traces:
            data.append({**trace, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        for number, burst in enumerate(bursts):
            layout["shapes"].append({"type": "rect", "xref": f"x{suffix}", "yref": f"y{suffix} domain", "x0": burst["start"],
                                     "x1": burst["end"], "y0": 0, "y1": 1, "layer": "below", "line": {"width": 0},
                                     "fillcolor": BURST_FILL, "name": f"burst-{number}"})
    layout[f"xaxis{'' if n == 1 else n}"]["title"] = {"text": "time (UTC)", "font": {"size": 11}}
    for burst in bursts:
        layout["annotations"].append({"xref": "x", "yref": "paper", "x": burst["start"], "y": 1.0, "yanchor": "bottom",
                                      "xanchor": "left", "showarrow": False, "text": f"checkpoint {human_bytes(burst['write_bytes'])}",
                                      "font": {"size": 10, "color": COLOURS["write"]}})
    return {"data": data, "layout": layout}


FIGURES = {"io": storage_figure}
