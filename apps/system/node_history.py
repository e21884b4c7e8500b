"""A node's own history on one time axis: its GPUs', NICs' and host's telemetry, the jobs that ran on it, its vetting
results and health changes (issue 39; the page ``/nodes/<host>/`` and ``GET /api/v1/nodes/<host>/history/``).

* ``window(since, until, now)``: the window asked for, as UTC datetimes; at most ``MAX_DAYS`` (31) days, default the
  last ``DEFAULT_DAYS`` (7). A bad value is a ``WindowError`` naming the parameter.
* ``step_for(seconds)``: the bucket width, a round number of seconds giving at most ``MAX_BUCKETS`` (400) buckets.
* ``figure(history)``: the Plotly figure of a history (the answer of the API): rows GPU (SM activity per GPU), GPU
  memory (page cache in it, per GPU, coherent-memory nodes), NICs (bytes/s sent per NIC), host (CPU busy, memory
  used), jobs (one bar per job, named only when the viewer may see it), vetting (failures and passes) with health
  changes as vertical lines on every row.

Plain Python: no Django.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

DEFAULT_DAYS, MAX_DAYS, MAX_BUCKETS = 7, 31, 400
STEPS = (60, 300, 600, 1800, 3600, 7200, 10800, 21600)
ANOTHER = "another project's job"
OUTCOME_COLOURS = {"pass": "#2e7d32", "warn": "#edae49", "fail": "#b3261e", "critical": "#6d071a"}
GPU_COLOURS = ("#1f4e79", "#d1495b", "#00798c", "#edae49", "#8e5ea2", "#30343b", "#66a182", "#b5651d")


class WindowError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _moment(value, field: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            raise WindowError(field, f"{field} {text[:40]!r} is not an ISO 8601 time such as 2026-11-21T10:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    if not datetime(2000, 1, 1, tzinfo=timezone.utc) <= moment <= datetime(2200, 1, 1, tzinfo=timezone.utc):
        raise WindowError(field, f"{field} {value!s:.40} is not between 2000 and 2200")
    return moment.astimezone(timezone.utc)


def window(since=None, until=None, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[since, until): until defaults to now, since to DEFAULT_DAYS before until; at most MAX_DAYS long."""
    now = now or datetime.now(timezone.utc)
    end = _moment(until, "until") or now
    start = _moment(since, "since") or end - timedelta(days=DEFAULT_DAYS)
    if end <= start:
        raise WindowError("until", f"until ({end:%Y-%m-%dT%H:%M:%SZ}) must be after since ({start:%Y-%m-%dT%H:%M:%SZ})")
    if end - start > timedelta(days=MAX_DAYS):
        raise WindowError("since", f"the window is {(end - start).days} days long; at most {MAX_DAYS} days (narrow since "
                                   "or until)")
    return start, end


def step_for(seconds: float) -> int:
    for step in STEPS:
        if seconds / step <= MAX_BUCKETS:
            return step
    return STEPS[-1]


def _row(title: str, traces: list[dict], percent: bool = False) -> tuple[str, list[dict], bool]:
    return title, traces, percent


def _line(x, y, name, colour, hover, **extra) -> dict:
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": name, "connectgaps": False,
            "line": {"color": colour, "width": 1.3}, "hovertemplate": hover + "<extra>" + name + "</extra>", **extra}


def figure(history: dict) -> dict:
    """The history as {"data", "layout"} with rows on one shared time axis (empty rows left out)."""
    times = history.get("times") or []
    rows = []
    gpus = history.get("gpus") or {}
    if gpus:
        rows.append(_row("GPU SM active", [_line(times, values, f"GPU {gpu}", GPU_COLOURS[int(gpu) % 8], "%{y:.0%}")
                                           for gpu, values in sorted(gpus.items(), key=lambda kv: int(kv[0]))], True))
    cache = history.get("gpu_page_cache") or {}
    if cache:
        rows.append(_row("page cache in GPU memory (GB)",
                         [_line(times, [None if v is None else round(v / 1e9, 2) for v in values], f"GPU {gpu}",
                                GPU_COLOURS[int(gpu) % 8], "%{y:.1f} GB", showlegend=False)
                          for gpu, values in sorted(cache.items(), key=lambda kv: int(kv[0]))]))
    nics = history.get("nics") or {}
    if nics:
        rows.append(_row("NIC sent (GB/s)", [_line(times, [None if v is None else round(v / 1e9, 3) for v in values], nic,
                                                  GPU_COLOURS[(i + 4) % 8], "%{y:.2f} GB/s")
                                            for i, (nic, values) in enumerate(sorted(nics.items()))]))
    host = history.get("host_metrics") or {}
    host_traces = [_line(times, host[key], name, colour, "%{y:.0%}")
                   for key, name, colour in (("cpu_busy", "CPU busy", "#30343b"), ("mem_used", "host memory used", "#00798c"))
                   if any(v is not None for v in host.get(key) or [])]
    if host_traces:
        rows.append(_row("host", host_traces, True))
    jobs = history.get("jobs") or []
    vetting = history.get("vetting") or []
    data, shapes, annotations = [], [], []
    n = len(rows) + (1 if jobs else 0) + (1 if vetting else 0)
    n = max(n, 1)
    gap = 0.04
    height = (1.0 - gap * (n - 1)) / n
    layout = {"height": 150 * n + 110, "margin": {"l": 80, "r": 20, "t": 50, "b": 40}, "plot_bgcolor": "white",
              "hovermode": "closest", "showlegend": True, "uirevision": "node-history",
              "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom",
                         "font": {"size": 11}}}
    axes = []
    index = 0

    def axis(title, percent=False, **extra):
        nonlocal index
        top = 1.0 - index * (height + gap)
        suffix = "" if index == 0 else str(index + 1)
        layout[f"yaxis{suffix}"] = {"domain": [max(0.0, top - height), top], "title": {"text": title, "font": {"size": 11}},
                                    "gridcolor": "#eceff3", "zeroline": False, "automargin": True, **extra}
        if percent:
            layout[f"yaxis{suffix}"].update(range=[0, 1.02], tickformat=".0%")
        layout[f"xaxis{suffix}"] = {"type": "date", "anchor": f"y{suffix}", "gridcolor": "#eceff3",
                                    "showticklabels": False, **({} if index == 0 else {"matches": "x"})}
        axes.append(suffix)
        index += 1
        return suffix

    for title, traces, percent in rows:
        suffix = axis(title, percent)
        data.extend({**trace, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"} for trace in traces)
    if jobs:
        suffix = axis("jobs", range=[0, max(1, len(jobs)) + 0.5], showticklabels=False, fixedrange=True)
        until = history.get("until")
        for lane, job in enumerate(jobs):
            colour = "#1f4e79" if job.get("visible") else "#9aa3ad"
            end = job.get("end") or until
            data.append({"type": "scatter", "mode": "lines", "x": [job["start"], end], "y": [lane + 1, lane + 1],
                         "line": {"color": colour, "width": 8}, "name": job["label"], "showlegend": False,
                         "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "hovertemplate": job["label"] + "<extra></extra>"})
            annotations.append({"x": job["start"], "y": lane + 1, "xref": f"x{suffix}", "yref": f"y{suffix}",
                                "text": job["label"], "showarrow": False, "xanchor": "left", "yanchor": "bottom",
                                "font": {"size": 10, "color": colour}})
    if vetting:
        suffix = axis("vetting", range=[0, 1], showticklabels=False, fixedrange=True)
        by_outcome: dict[str, list[dict]] = {}
        for item in vetting:
            by_outcome.setdefault(item["outcome"], []).append(item)
        for outcome, items in sorted(by_outcome.items()):
            data.append({"type": "scatter", "mode": "markers", "x": [i["time"] for i in items],
                         "y": [0.75 if outcome in ("fail", "critical") else 0.35] * len(items),
                         "marker": {"color": OUTCOME_COLOURS.get(outcome, "#5b6470"), "size": 8,
                                    "symbol": "x" if outcome in ("fail", "critical") else "circle"},
                         "name": f"vetting {outcome}", "customdata": [i["eval_name"] for i in items],
                         "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
                         "hovertemplate": "%{customdata}: " + outcome + "<extra></extra>"})
    for change in history.get("health") or []:
        for suffix in axes:
            shapes.append({"type": "line", "xref": f"x{suffix}", "yref": f"y{suffix} domain", "x0": change["time"],
                           "x1": change["time"], "y0": 0, "y1": 1, "line": {"color": "#b3261e", "width": 1, "dash": "dot"}})
        if axes:
            annotations.append({"x": change["time"], "y": 1, "xref": "x", "yref": "y domain", "showarrow": False,
                                "text": f"{change['from_state']} → {change['to_state']} ", "yanchor": "top",
                                "xanchor": "right", "bgcolor": "rgba(255,255,255,0.8)",
                                "font": {"size": 10, "color": "#b3261e"}})
    if axes:
        layout[f"xaxis{axes[-1]}"].update(showticklabels=True, title={"text": "time (UTC)", "font": {"size": 11}})
        layout["xaxis"]["range"] = [history.get("since"), history.get("until")]
    layout["shapes"], layout["annotations"] = shapes, annotations
    return {"data": data, "layout": layout}
