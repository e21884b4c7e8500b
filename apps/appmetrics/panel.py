"""The job page's "Training throughput" panel: the training loop's own numbers beside the GPUs' telemetry.

* **First screen** (:func:`summary`): tokens/s per GPU, MFU with the gap to the tensor pipes' activity in words,
  energy per token, the freshness of the application series, and one finding per kind of throughput dip, each
  explained once ("Throughput fell 42 % for 90 s at 10:30 UTC (checkpoint: all 512 GPUs idle together)"), a
  straggler's onset as a warning with what to do. Summaries are read on every page view, and
  ``selectors.job_efficiency`` reads the telemetry store and the job's cube and looks for dips: it is cached
  (:func:`efficiency`) under what changes it — the telemetry product, the saturation scoring (stragglers), the model
  config, the job's row and the stamp the ingest services set when series are written — and for a running job for
  :data:`LIVE_TTL` seconds at most.
* **The figure** (:func:`throughput_figure`, served by the job page at ``panels/appmetrics/throughput.json``): one
  Plotly figure, subplots sharing the time axis — tokens/s with the steady level, iteration time, loss, and the mean
  SM and tensor activity of the job's GPUs from its telemetry cube (no new endpoint: the cube the telemetry panel
  draws from) — every dip shaded on every subplot, its kind in the legend and on a strip at the top, its reason in
  the hover. The answer carries ``coverage`` (the first and last row) beside ``data`` and ``layout``; the panel's
  script redraws it in place (``Plotly.react``, ``uirevision``) while the job runs.
* **No series**: the panel says how to send them (the ``belvedere_client.log`` helper, the Megatron-LM output to
  ``POST .../metrics/?format=megatron-log``, a TensorBoard event file) instead of drawing an empty plot.
"""
from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta, timezone as dt_timezone

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.cache import cache
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from apps.core.numbers import clock, count, duration_words, significant
from apps.core.panels import Fact, Finding, Freshness, PanelSummary
from apps.saturation.models import JobSaturation
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.models import JobTelemetry
from apps.telemetry.selectors import host_row, job_cube, job_host_samples

from . import efficiency as eff
from . import selectors
from .compare import compare_link
from .models import JobModelConfig
from .series import thin
from .services import SERIES_STAMP

KEY = "appmetrics"
LIVE_TTL = 30  # seconds a running job's efficiency is kept at most (new rows arrive all the time)
DONE_TTL = 6 * 3600  # a finished job's: its key changes when anything it depends on does
MAX_POINTS = 2000  # per series in the figure: about one per pixel column of a wide screen
FIGURE_SERIES = ("tokens_per_s", "iteration_s", "loss")
UTIL_FIELD = 203  # GPU utilisation, where the profiling fields (eff.SM_FIELD, eff.TENSOR_FIELD) are missing
KIND_COLOURS = {"checkpoint": "#5a6472", "evaluation": "#00798c", "straggler": "#d1495b", "throttling": "#edae49",
                "restart": "#8e5ea2", "pause": "#3d7ea6", "host": "#b5651d", "unknown": "#9aa3ad"}
KIND_FILLS = {"checkpoint": "rgba(90,100,114,0.16)", "evaluation": "rgba(0,121,140,0.14)",
              "straggler": "rgba(209,73,91,0.16)", "throttling": "rgba(237,174,73,0.22)",
              "restart": "rgba(142,94,162,0.16)", "pause": "rgba(61,126,166,0.16)", "host": "rgba(181,101,29,0.16)",
              "unknown": "rgba(154,163,173,0.18)"}
# What to do about each kind of dip: one sentence a user can act on.
KIND_ACTIONS = {
    "checkpoint": "Expected while a checkpoint is written; if the pauses cost too much, save asynchronously "
                  "(Megatron-LM --async-save) or less often.",
    "evaluation": "Expected during evaluation; evaluate less often or on fewer samples if it costs too much.",
    "straggler": "The whole job waits for its slowest GPU: see the stragglers under GPU saturation and resubmit "
                 "with that node excluded (--exclude=NODE); report the node to staff.",
    "throttling": "Clocks were held down by power or heat: staff should check cooling and power capping on those "
                  "nodes; the job loses speed it paid for.",
    "restart": "The run restarted: look at the job's output just before for the failure that caused it.",
    "pause": "Every GPU stopped together: a checkpoint, an evaluation or the data loader starving them. Log "
             "event.checkpoint and event.evaluation markers to tell them apart; if it is data, add loader workers.",
    "host": "The GPUs waited on their data loaders: more loader workers (DataLoader num_workers) on each rank's NUMA "
            "domain, pre-tokenised data, pinned memory and prefetching; see the node's host row.",
    "unknown": "No hardware cause at that time: look at the job's output for data loading, I/O or host-side work.",
}
KIND_LEVELS = {"straggler": "warning", "throttling": "warning", "restart": "warning", "host": "warning"}
KIND_ORDER = ("straggler", "throttling", "restart", "host", "pause", "unknown", "checkpoint", "evaluation")


# ---------------------------------------------------------------- what changes the numbers

def series_stamp(job) -> str:
    """The moment the job's series were last written, as the ingest services record it (``"0"`` if unknown)."""
    return str(cache.get(SERIES_STAMP.format(pk=job.pk), "0"))


def _inputs(job) -> str:
    """Everything ``job_efficiency`` depends on besides the series themselves, as one string."""
    telemetry = JobTelemetry.objects.filter(job=job).values_list("pk", "status", "materialized", "product").first()
    saturation = JobSaturation.objects.filter(job=job).values_list("pk", "computed").first()
    model = JobModelConfig.objects.filter(job=job).values_list("updated", flat=True).first()
    return "|".join(str(part) for part in (job.pk, job.state, job.start_time, job.end_time, job.gpus, job.node_count,
                                           telemetry, saturation, model, series_stamp(job)))


def _recently_ended(job) -> bool:
    """Ended less than an hour ago: the epilog may still upload the job's output."""
    return job.end_time is not None and timezone.now() - job.end_time < timedelta(hours=1)


def version(job) -> str | None:
    """The figure's ETag: None while the job runs or just ended (drawn afresh each time: rows keep arriving)."""
    if job.start_time is None or job.is_active or _recently_ended(job):
        return None
    return "a" + hashlib.sha256(_inputs(job).encode()).hexdigest()[:20]


def efficiency(job) -> dict:
    """``selectors.job_efficiency(job)``, cached under what changes it (it reads the store and the job's cube and
    looks for dips: hundreds of milliseconds on a large job, too much for every page view)."""
    key = "appmetrics:efficiency:" + hashlib.sha256(_inputs(job).encode()).hexdigest()
    found = cache.get(key)
    if found is None:
        found = selectors.job_efficiency(job)
        cache.set(key, found, LIVE_TTL if job.is_active or _recently_ended(job) else DONE_TTL)
    return found


# ---------------------------------------------------------------- words

def _moment(value) -> datetime | None:
    if not value:
        return None
    moment = pd.Timestamp(value)
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
    return moment.to_pydatetime()


def _percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{significant(100 * fraction, 2)} %"


def event_words(event: dict, job_end: datetime | None = None, reference: datetime | None = None) -> str:
    """"Throughput fell 42 % for 90 s at 10:30 UTC (checkpoint: all 512 GPUs idle together)"."""
    start, end = _moment(event.get("start")), _moment(event.get("end"))
    dip = event.get("dip")
    how = f"fell {significant(100 * dip, 2)} %" if dip is not None and math.isfinite(dip) else "fell"
    if start is None:
        when = ""
    elif end is None:
        when = f" from {clock(start, reference)} to the end of the data"
    else:
        when = f" for {_span_words((end - start).total_seconds())} at {clock(start, reference)}"
    kind = event.get("kind") or "unknown"
    # The reason's first clause: the rest repeats the dip's size and length, said already.
    reason = (event.get("reason") or "").split("; ")[0].strip().rstrip(".")
    because = reason if kind in reason.lower() else (f"{kind}: {reason}" if reason else kind)
    return f"Throughput {how}{when} — {because}" if "(" in because else f"Throughput {how}{when} ({because})"


def _span_words(seconds: float) -> str:
    """A dip's length: whole seconds up to three minutes ("90 s"), then as ``duration_words`` says it."""
    return f"{seconds:.0f} s" if seconds < 180 else duration_words(seconds)


def event_findings(events: list[dict], reference: datetime | None = None) -> list[Finding]:
    """One finding per kind of dip: the largest one in words, how many more like it, and what to do."""
    by_kind: dict[str, list[dict]] = {}
    for event in events:
        by_kind.setdefault(event.get("kind") or "unknown", []).append(event)
    findings = []
    for kind in sorted(by_kind, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER)):
        items = by_kind[kind]
        if kind == "straggler":  # the onset is what matters: the first one
            worst = min(items, key=lambda e: e.get("start") or "")
        else:
            worst = max(items, key=lambda e: e.get("dip") or 0)
        title = event_words(worst, reference=reference)
        if len(items) > 1:
            title += f"; {len(items) - 1:,} more like it"
        findings.append(Finding(KIND_LEVELS.get(kind, "info"), title + ".", KIND_ACTIONS.get(kind, KIND_ACTIONS["unknown"]),
                                "#appmetrics-figure", KEY))
    return findings


def freshness(job, coverage: dict) -> Freshness | None:
    """The application series' real first and last row: live, lagging or stale while the job runs; complete or
    ending early once it has ended."""
    first, last = _moment(coverage.get("first")), _moment(coverage.get("last"))
    if last is None:
        return None
    now = timezone.now()
    rows = count(coverage.get("rows"), "row")
    span = f"{rows} from {clock(first, now)} to {clock(last, now)}"
    if job.is_active:
        late = (now - last).total_seconds()
        state = "live" if late <= 300 else "lagging" if late <= 1800 else "stale"
        words = f"Application metrics: {span}, the last {duration_words(late)} ago."
    else:
        end = job.end_time or now
        short = (end - last).total_seconds()
        state = "complete" if short <= 900 else "ends early"
        words = (f"Application metrics: {span}." if state == "complete"
                 else f"Application metrics: {span}, {duration_words(short)} before the job ended.")
    return Freshness("Application metrics", first, last, state, words)


def summary(job) -> PanelSummary | None:
    """Tokens/s per GPU, MFU and energy per token, the series' freshness and the dips explained. Nothing for a job
    without application series: not every GPU job trains a model, and the panel says how to send them."""
    if job.start_time is None:
        return None
    numbers = efficiency(job)
    coverage = numbers.get("coverage") or {}
    if not coverage.get("rows"):
        return None
    part = PanelSummary()
    missing = numbers.get("missing") or []
    per_gpu = numbers.get("tokens_per_s_per_gpu")
    if per_gpu is not None:
        part.facts.append(Fact("Tokens/s per GPU", significant(per_gpu),
                               f"{significant(numbers.get('tokens_per_s'))} tokens/s over {count(numbers.get('gpus'), 'GPU')}, "
                               "the median after the warm-up", "info", "fact-tokens-per-gpu", rank=40))
    else:
        part.facts.append(Fact("Tokens/s per GPU", "–", _first(missing, "throughput") or "no throughput series",
                               "info", "fact-tokens-per-gpu", rank=40))
    mfu = numbers.get("mfu")
    part.facts.append(Fact("MFU", _percent(mfu), numbers.get("gap_words") if mfu is not None else
                           (_first(missing, "model config", "peak") or "needs the model config and the GPU peak"),
                           "info", "fact-mfu", rank=41))
    energy = numbers.get("energy_per_token_j")
    part.facts.append(Fact("Energy per token", _joules(energy), "DCGM energy counters of the job's GPUs / tokens trained"
                           if energy is not None else (_first(missing, "energy") or "no energy counter"),
                           "info", "fact-energy-per-token", rank=42))
    fresh = freshness(job, coverage)
    if fresh is not None:
        part.freshness.append(fresh)
    part.findings.extend(event_findings(numbers.get("events") or [], reference=timezone.now()))
    host = numbers.get("host_bound")
    if host:  # issue 39: named as the host's, not as unsaturated GPUs
        part.findings.append(Finding("warning", f"{host['sentence']} — limited by {host['limiter']}.", host["action"],
                                     "#appmetrics-figure", KEY, rank=45))
        part.facts.append(Fact("Limited by", host["limiter"], host["sentence"], "warning", "fact-host-limiter", rank=43))
    return part


def _first(missing: list[str], *words: str) -> str:
    for reason in missing:
        if any(word in reason for word in words):
            return reason
    return ""


def _joules(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 1:
        return f"{significant(value * 1000)} mJ"
    return f"{significant(value)} J"


# ---------------------------------------------------------------- the shell

def _url(name: str, *args) -> str | None:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:  # the API is not routed (yet)
        return None


def context(job, request) -> dict:
    """What the template needs: the numbers (from the cached efficiency), where the figure loads from and, for a job
    without series, the three ways to send them with this job's own addresses."""
    args = [job.cluster.name, job.job_id]
    metrics_url = _url("appmetrics-api:metrics", *args) or f"/api/v1/jobs/{job.cluster.name}/{job.job_id}/metrics/"
    result = {
        "appmetrics_metrics_url": metrics_url,
        "appmetrics_metrics_full_url": request.build_absolute_uri(metrics_url),
        "appmetrics_efficiency_url": _url("appmetrics-api:efficiency", *args),
        "appmetrics_model_url": _url("appmetrics-api:model", *args),
        "appmetrics_figure_url": reverse("jobs:panel-figure", args=[*args, KEY, "throughput"]),
        "appmetrics_live_seconds": settings.JOB_PAGE_LIVE_SECONDS,
        "appmetrics_compare": compare_link(job, request.user),
    }
    if job.start_time is None:
        result["appmetrics_reason"] = "The job has not started: its training metrics appear here once it runs."
        return result
    try:
        numbers = efficiency(job)
    except TelemetryUnavailable as exc:
        result["appmetrics_reason"] = f"The telemetry store cannot be read now: {exc}"
        return result
    coverage = numbers.get("coverage") or {}
    result.update(appmetrics=numbers, appmetrics_has_series=bool(coverage.get("rows")),
                  appmetrics_freshness=freshness(job, coverage),
                  appmetrics_events=[{**event, "words": event_words(event, reference=timezone.now())}
                                     for event in numbers.get("events") or []],
                  appmetrics_mfu=_percent(numbers.get("mfu")), appmetrics_energy=_joules(numbers.get("energy_per_token_j")),
                  appmetrics_per_gpu=significant(numbers.get("tokens_per_s_per_gpu")),
                  appmetrics_tokens=significant(numbers.get("tokens_per_s")))
    return result


# ---------------------------------------------------------------- the figure

def _iso(values) -> list[str]:
    """Times as the job page's other figures give them: UTC seconds with a Z."""
    return [str(t) + "Z" for t in np.datetime_as_string(np.asarray(values, dtype="datetime64[ns]"), unit="s")]


def _app_series(job, numbers: dict) -> dict[str, pd.DataFrame]:
    """The figure's application series by name (thinned); tokens/s derived from the iteration time and the global
    batch when the job logs no tokens_per_s (as the efficiency does: ``efficiency.throughput``)."""
    frame = selectors.job_series(job, names=list(FIGURE_SERIES))
    out = {name: group.iloc[thin(len(group), MAX_POINTS)] for name, group in frame.groupby("name", sort=False)}
    model = numbers.get("model") or {}
    if "tokens_per_s" not in out:
        _ts, rate, source = eff.throughput(frame, model.get("global_batch"), model.get("seq_len"))
        if source:
            derived = frame[frame["name"] == "iteration_s"].assign(value=rate)
            out["tokens_per_s"] = derived.iloc[thin(len(derived), MAX_POINTS)]
    return out


def _gpu_activity(job) -> tuple[list[str], dict[str, np.ndarray], str]:
    """(bucket times, {name: mean over the job's GPUs per bucket}, words) from the job's telemetry cube: SM and
    tensor activity (DCGM 1002, 1004), or GPU utilisation (203) where the profiling fields are missing."""
    cube = job_cube(job, (eff.SM_FIELD, eff.TENSOR_FIELD, UTIL_FIELD))
    if cube is None or not len(cube.buckets):
        return [], {}, "no GPU telemetry product for this job yet"
    arrays = eff.evidence_arrays(list(cube.fields), cube.mean, cube.max, cube.labels())
    found = {name: arrays[key] for name, key in (("SM active", "sm_active"), ("tensor active", "tensor_active"))
             if np.isfinite(arrays[key]).any()}
    if not found and cube.field_index(UTIL_FIELD) is not None:
        with np.errstate(all="ignore"):
            block = cube.mean[:, cube.field_index(UTIL_FIELD), :].astype(float)
            if np.isfinite(block).any():
                found["GPU busy"] = np.nanmean(block, axis=0) / 100.0
    words = f"mean of {count(len(cube.hosts), 'GPU')} per {duration_words(cube.step)}"
    return _iso(cube.buckets), found, words


def _broken_at_gaps(times: np.ndarray, values: list, custom: list) -> tuple[list, list, list]:
    """x, y and customdata of a line with a break (a None point) wherever no row came for more than
    ``GAP_FACTOR`` logging intervals: the line never draws a slope across time nothing was logged."""
    x = _iso(times)
    if len(times) < 3:
        return x, list(values), list(custom)
    spacing = np.diff(np.asarray(times, dtype="datetime64[ns]").astype("int64"))
    gap = spacing > eff.GAP_FACTOR * float(np.median(spacing))
    out_x, out_y, out_c = [x[0]], [values[0]], [custom[0]]
    for i in range(1, len(x)):
        if gap[i - 1]:
            out_x.append(x[i - 1])
            out_y.append(None)
            out_c.append([None, ""])
        out_x.append(x[i])
        out_y.append(values[i])
        out_c.append(custom[i])
    return out_x, out_y, out_c


def _event_reasons(times: np.ndarray, events: list[dict]) -> list[str]:
    """Per point of a series, the reason of the dip it falls in ("" outside every dip): the hover says why."""
    reasons = np.full(len(times), "", dtype=object)
    stamps = np.asarray(times, dtype="datetime64[ns]")
    for event in events:
        start = _moment(event.get("start"))
        if start is None:
            continue
        end = _moment(event.get("end"))
        lo = np.datetime64(start.replace(tzinfo=None), "ns")
        hi = np.datetime64(end.replace(tzinfo=None), "ns") if end else stamps.max(initial=lo)
        inside = (stamps >= lo) & (stamps <= hi)
        reasons[inside] = f"{event.get('kind')}: {event.get('reason') or ''}".rstrip(": ")
    return reasons.tolist()


def throughput_figure(job, query) -> dict:
    """The panel's figure as Plotly JSON, with ``coverage`` and ``events`` beside it (an empty ``data`` and a
    ``reason`` when there is nothing to draw)."""
    numbers = efficiency(job)
    coverage = numbers.get("coverage") or {}
    events = numbers.get("events") or []
    body = {"coverage": coverage, "events": events, "missing": numbers.get("missing") or []}
    if not coverage.get("rows"):
        return {**body, "data": [], "layout": {}, "reason": "no application metrics for this job"}
    series = _app_series(job, numbers)
    gpu_times, gpu, gpu_words = _gpu_activity(job)
    rows = []  # (axis title, traces)
    if "tokens_per_s" in series:
        part = series["tokens_per_s"]
        times = part["ts"].to_numpy("datetime64[ns]")
        steps = [None if pd.isna(s) else int(s) for s in part["step"]]
        x, y, custom = _broken_at_gaps(times, part["value"].round(1).tolist(),
                                       [[s, r] for s, r in zip(steps, _event_reasons(times, events))])
        traces = [{"type": "scatter", "mode": "lines", "x": x, "y": y, "name": "tokens/s",
                   "line": {"color": "#1f4e79", "width": 1.5}, "customdata": custom,
                   "hovertemplate": "%{y:,.0f} tokens/s · step %{customdata[0]}<br>%{customdata[1]}<extra></extra>"}]
        steady = numbers.get("tokens_per_s")
        if steady:
            traces.append({"type": "scatter", "mode": "lines", "x": [x[0], x[-1]], "y": [steady, steady],
                           "name": f"steady {significant(steady)} tokens/s", "hoverinfo": "skip",
                           "line": {"color": "#1f4e79", "width": 1, "dash": "dash"}})
        rows.append(("tokens/s", traces))
    for name, title, colour in (("iteration_s", "s / iteration", "#00798c"), ("loss", "loss", "#30343b")):
        if name in series:
            part = series[name]
            times = part["ts"].to_numpy("datetime64[ns]")
            x, y, custom = _broken_at_gaps(times, part["value"].tolist(),
                                           [[None if pd.isna(s) else int(s), r] for s, r in
                                            zip(part["step"], _event_reasons(times, events))])
            rows.append((title, [{"type": "scatter", "mode": "lines", "x": x, "y": y,
                                  "name": title, "line": {"color": colour, "width": 1.5}, "customdata": custom,
                                  "hovertemplate": "%{y:.4~g} · step %{customdata[0]}<br>%{customdata[1]}<extra>"
                                                   + title + "</extra>"}]))
    if gpu:
        colours = {"SM active": "#d1495b", "tensor active": "#edae49", "GPU busy": "#d1495b"}
        rows.append(("GPU activity", [{"type": "scatter", "mode": "lines", "x": gpu_times,
                                       "y": [None if not math.isfinite(v) else round(float(v), 4) for v in values],
                                       "name": f"{name} ({gpu_words})", "line": {"color": colours[name], "width": 1.5},
                                       "hovertemplate": "%{y:.0%} " + name + "<extra></extra>"}
                                      for name, values in gpu.items()]))
    host = _host_activity(job)
    if host:  # issue 39: the host under the GPUs: CPU busy, the data loaders' CPU, host memory used
        rows.append(("host", host))
    body.update(figure_layout(rows, events, gpu_axis=bool(gpu)))
    body["gpu_words"] = gpu_words
    late = _late_telemetry_words(coverage, gpu_times) if gpu else None
    if late:  # an empty left part of the GPU row would read as idle GPUs
        suffix = "" if len(rows) == 1 else str(len(rows))
        body["layout"]["annotations"].append({"text": late, "showarrow": False, "xref": f"x{suffix} domain",
                                              "yref": f"y{suffix} domain", "x": 0.005, "y": 0.04, "xanchor": "left",
                                              "yanchor": "bottom", "font": {"size": 11, "color": "#5b6470"}})
    return body


HOST_TRACES = (("cpu_busy", "CPU busy", "#30343b"), ("loader_cpu", "data-loader CPU", "#b5651d"),
               ("mem_used", "host memory used", "#00798c"))


def _host_activity(job) -> list[dict]:
    """The host row's traces (shares 0-1, means over the job's nodes per minute or coarser); [] without host samples."""
    try:
        frame = job_host_samples(job)
    except TelemetryUnavailable:
        return []
    if frame.empty:
        return []
    span = ((job.end_time or timezone.now()) - job.start_time).total_seconds()
    row = host_row(frame, max(60.0, span / MAX_POINTS))
    x = _iso(row["times"])
    return [{"type": "scatter", "mode": "lines", "x": x,
             "y": [None if not math.isfinite(v) else round(float(v), 4) for v in row[key]],
             "name": name, "line": {"color": colour, "width": 1.5}, "hovertemplate": "%{y:.0%} " + name + "<extra></extra>"}
            for key, name, colour in HOST_TRACES if np.isfinite(np.asarray(row[key], dtype="float64")).any()]


def _late_telemetry_words(coverage: dict, gpu_times: list[str]) -> str | None:
    """"GPU telemetry only from 07:20 UTC" when the GPUs' side starts well after the application's first row
    (10 minutes, or a twentieth of the span), else None."""
    first, last, gpu_first = _moment(coverage.get("first")), _moment(coverage.get("last")), _moment(gpu_times[0])
    if None in (first, last, gpu_first):
        return None
    if not eff.telemetry_starts_late(first, gpu_first, last):
        return None
    when = gpu_first.strftime("%H:%M UTC") if first.date() == last.date() else gpu_first.strftime("%Y-%m-%d %H:%M UTC")
    return f"GPU telemetry only from {when}"


def figure_layout(rows: list[tuple[str, list[dict]]], events: list[dict], gpu_axis: bool = False) -> dict:
    """Stack ``rows`` (axis title, traces) on one shared time axis under a strip of the dips; shade every dip on
    every row and name its kind (legend, strip) — {"data", "layout"}."""
    strip = 0.06 if events else 0.0
    gap = 0.045
    n = max(1, len(rows))
    height_each = (1.0 - strip - gap * n) / n
    data, layout = [], {
        "height": 190 * n + (70 if events else 40) + 60, "margin": {"l": 70, "r": 20, "t": 10, "b": 40},
        "plot_bgcolor": "white", "hovermode": "x", "showlegend": True, "uirevision": KEY,
        "legend": {"orientation": "h", "y": -0.06, "yanchor": "top", "font": {"size": 11}},
        "shapes": [], "annotations": [],
    }
    axes = []
    for index, (title, traces) in enumerate(rows):
        top = 1.0 - strip - gap * (index + (1 if events else 0)) - height_each * index
        suffix = "" if index == 0 else str(index + 1)
        axes.append(suffix)
        y = f"yaxis{suffix}"
        layout[y] = {"domain": [max(0.0, top - height_each), top], "title": {"text": title, "font": {"size": 11}},
                     "zeroline": False, "gridcolor": "#eceff3", "automargin": True}
        if (title == "GPU activity" and gpu_axis) or title == "host":
            layout[y].update(range=[0, 1.02], tickformat=".0%")
        layout[f"xaxis{suffix}"] = {"type": "date", "anchor": f"y{suffix}", "gridcolor": "#eceff3",
                                    "showticklabels": index == len(rows) - 1, **({} if index == 0 else {"matches": "x"})}
        for trace in traces:
            data.append({**trace, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
    last = axes[-1] if axes else ""
    if axes:
        layout[f"xaxis{last}"]["title"] = {"text": "time (UTC)", "font": {"size": 11}}
    if events:
        strip_axis = f"{len(rows) + 1}"
        layout[f"yaxis{strip_axis}"] = {"domain": [1.0 - strip, 1.0], "range": [0, 1], "visible": False, "fixedrange": True}
        layout[f"xaxis{strip_axis}"] = {"type": "date", "anchor": f"y{strip_axis}", "matches": "x", "visible": False}
        data.extend(_event_traces(events, strip_axis, data))
        for event in events:
            start, end = _event_span(event, data)
            if start is None:
                continue
            for suffix in axes:
                layout["shapes"].append({"type": "rect", "xref": f"x{suffix}", "yref": f"y{suffix} domain",
                                         "x0": start, "x1": end, "y0": 0, "y1": 1, "layer": "below", "line": {"width": 0},
                                         "fillcolor": KIND_FILLS.get(event.get("kind"), KIND_FILLS["unknown"])})
        layout["annotations"].extend(_event_labels(events, strip_axis, data))
    return {"data": data, "layout": layout}


def _event_span(event: dict, data: list[dict]) -> tuple[str | None, str | None]:
    start = _moment(event.get("start"))
    if start is None:
        return None, None
    end = _moment(event.get("end"))
    if end is None:  # lasts to the end of the data
        last = max((trace["x"][-1] for trace in data if trace.get("x")), default=None)
        return _stamp(start), last or _stamp(start)
    return _stamp(start), _stamp(end)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_traces(events: list[dict], axis: str, data: list[dict]) -> list[dict]:
    """One bar per dip on the strip (hover: what happened and why), one legend entry per kind."""
    traces, named = [], set()
    for event in events:
        start, end = _event_span(event, data)
        if start is None:
            continue
        kind = event.get("kind") or "unknown"
        words = event_words(event)
        points = pd.date_range(pd.Timestamp(start), pd.Timestamp(end), periods=12)
        traces.append({"type": "scatter", "mode": "lines", "x": _iso(points.tz_convert(None).to_numpy()), "y": [0.3] * len(points),
                       "xaxis": f"x{axis}", "yaxis": f"y{axis}", "name": kind, "legendgroup": kind,
                       "showlegend": kind not in named, "line": {"color": KIND_COLOURS.get(kind, KIND_COLOURS["unknown"]),
                                                                  "width": 12},
                       "hovertemplate": words + "<extra></extra>",
                       "meta": {"event": True}})
        named.add(kind)
    return traces


def _event_labels(events: list[dict], axis: str, data: list[dict]) -> list[dict]:
    """The kind above each dip on the strip, leaving out labels that would overlap the previous one."""
    spans = [(_event_span(event, data), event.get("kind") or "unknown") for event in events]
    spans = [((start, end), kind) for (start, end), kind in spans if start is not None]
    if not spans:
        return []
    times = [t for trace in data if trace.get("x") and trace.get("yaxis") != f"y{axis}" for t in (trace["x"][0], trace["x"][-1])]
    first = min([pd.Timestamp(t) for t in times] or [pd.Timestamp(spans[0][0][0])])
    last = max([pd.Timestamp(t) for t in times] or [pd.Timestamp(spans[-1][0][1])])
    room = max((last - first).total_seconds() / 16, 1.0)  # about 16 labels across the width
    labels, previous = [], None
    for (start, _end), kind in sorted(spans):
        moment = pd.Timestamp(start)
        if previous is not None and (moment - previous).total_seconds() < room:
            continue
        previous = moment
        labels.append({"xref": f"x{axis}", "yref": f"y{axis}", "x": start, "y": 0.55, "yanchor": "bottom", "xanchor": "left",
                       "text": kind, "showarrow": False, "font": {"size": 10, "color": KIND_COLOURS.get(kind, "#5a6472")}})
    return labels


FIGURES = {"throughput": throughput_figure}
