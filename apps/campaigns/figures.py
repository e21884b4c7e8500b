"""Figures of a campaign, as Plotly figure dicts: its curves across allocations and its goodput per job.

Plain Python: no Django.
"""
from __future__ import annotations

from datetime import datetime

from .goodput import PARTS

PART_COLOURS = {"productive": "#2e7d32", "startup": "#90a4ae", "restore": "#5c6bc0", "checkpoint": "#00838f",
                "lost_work": "#c62828", "hang": "#ad1457", "dips": "#ef6c00", "idle": "#8d6e63", "bad_nodes": "#4a148c",
                "shutdown": "#b0bec5"}
PART_LABELS = {"productive": "productive", "startup": "start-up", "restore": "restore", "checkpoint": "checkpoint stalls",
               "lost_work": "work lost", "hang": "hangs", "dips": "throughput dips", "idle": "idle GPUs",
               "bad_nodes": "bad nodes", "shutdown": "shutdown"}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def curves_figure(allocations: list[dict], failures: list[dict]) -> dict:
    """Tokens trained, loss and tokens/s per GPU on one time axis over every allocation.

    ``allocations``: {"job", "start", "end", "ts": [datetime], "tokens": [float|None], "loss": [float|None],
    "tokens_per_s_per_gpu": [float|None]} in time order; ``failures``: {"job", "end", "cause"}. Allocation starts are
    dotted grey lines, failures red ones with the cause on hover."""
    rows = (("tokens", "tokens trained", "y3"), ("loss", "loss", "y2"), ("tokens_per_s_per_gpu", "tokens/s per GPU", "y"))
    data = []
    for name, label, axis in rows:
        for index, allocation in enumerate(allocations):
            points = [(t, v) for t, v in zip(allocation["ts"], allocation.get(name) or []) if v is not None]
            if not points:
                continue
            data.append({"type": "scattergl", "mode": "lines", "name": label, "legendgroup": name, "showlegend": index == 0,
                         "x": [_iso(t) for t, _ in points], "y": [v for _, v in points], "yaxis": axis,
                         "line": {"width": 1.5, "color": {"tokens": "#1f4e79", "loss": "#c75000"}.get(name, "#2e7d32")},
                         "hovertemplate": f"{allocation['job']}<br>%{{x}}<br>{label}: %{{y:.4g}}<extra></extra>"})
    shapes, annotations = [], []
    for allocation in allocations:
        if allocation.get("start") is None:
            continue
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": _iso(allocation["start"]),
                       "x1": _iso(allocation["start"]), "y0": 0, "y1": 1, "line": {"color": "#9e9e9e", "width": 1, "dash": "dot"}})
    for failure in failures:
        if failure.get("end") is None:
            continue
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": _iso(failure["end"]), "x1": _iso(failure["end"]),
                       "y0": 0, "y1": 1, "line": {"color": "#c62828", "width": 2}})
        annotations.append({"x": _iso(failure["end"]), "y": 1.0, "xref": "x", "yref": "paper", "text": "✕",
                            "showarrow": False, "font": {"color": "#c62828", "size": 14}, "yanchor": "bottom",
                            "hovertext": f"{failure['job']}: {failure['cause']}"})
    layout = {
        "template": "plotly_white", "height": 560, "margin": {"l": 70, "r": 20, "t": 30, "b": 40}, "hovermode": "closest",
        "legend": {"orientation": "h", "y": -0.08},
        "xaxis": {"title": {"text": "time (UTC)"}, "type": "date", "anchor": "y"},
        "yaxis": {"domain": [0.0, 0.3], "title": {"text": "tokens/s per GPU"}, "rangemode": "tozero"},
        "yaxis2": {"domain": [0.35, 0.65], "title": {"text": "loss"}},
        "yaxis3": {"domain": [0.7, 1.0], "title": {"text": "tokens trained"}, "rangemode": "tozero"},
        "shapes": shapes, "annotations": annotations,
    }
    if not data:
        layout["annotations"] = annotations + [{"text": "no application metrics from the campaign's jobs", "showarrow": False,
                                                "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
    return {"data": data, "layout": layout}


def goodput_bars(jobs: list[dict]) -> dict:
    """Each job's allocated GPU-hours as a stacked bar: productive, then each badput part.

    ``jobs``: {"job", "productive_gpu_hours", "badput": {part: GPU-hours}, "goodput"} in time order."""
    labels = [job["job"] for job in jobs]
    data = [{"type": "bar", "name": PART_LABELS["productive"], "x": labels, "y": [job["productive_gpu_hours"] for job in jobs],
             "marker": {"color": PART_COLOURS["productive"]},
             "customdata": [None if job["goodput"] is None else round(job["goodput"] * 100, 1) for job in jobs],
             "hovertemplate": "%{x}: %{y:,.1f} GPU-h productive (goodput %{customdata} %)<extra></extra>"}]
    for part in PARTS:
        values = [job["badput"].get(part, 0.0) for job in jobs]
        if not any(value > 0 for value in values):
            continue
        data.append({"type": "bar", "name": PART_LABELS[part], "x": labels, "y": values,
                     "marker": {"color": PART_COLOURS[part]},
                     "hovertemplate": f"%{{x}}: %{{y:,.1f}} GPU-h {PART_LABELS[part]}<extra></extra>"})
    return {"data": data, "layout": {
        "template": "plotly_white", "barmode": "stack", "height": 340, "margin": {"l": 70, "r": 20, "t": 20, "b": 80},
        "xaxis": {"type": "category", "tickangle": -40, "title": {"text": "allocation (job)"}},
        "yaxis": {"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": 1.12},
    }}
