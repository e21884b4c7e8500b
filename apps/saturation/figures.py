"""Figures of a job's saturation product: Plotly figure objects. Plain Python: no Django."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .products import METRICS, SaturationCube, merge_rows, rebin

COMPONENT_COLOURS = {"S": "#1f4e79", "C": "#d1495b", "M": "#edae49", "L": "#00798c"}
PAGE_ROWS, PAGE_BINS = 512, 200  # the job page's heatmap; the API serves full resolution


def _stamp(t) -> str:
    return str(np.datetime_as_string(t, unit="s")) + "Z"


def _times(cube: SaturationCube) -> list[str]:
    return [_stamp(t) for t in cube.bin_starts]


def gpu_label(gpu: dict) -> str:
    prefix = f"rank {gpu['rank']} · " if gpu.get("rank") is not None else ""
    marker = "⚠ " if gpu.get("straggler") else ""
    return f"{marker}{prefix}{gpu['host']} GPU {gpu['gpu']}"


def colour_range(matrix: np.ndarray, metric: str) -> tuple[float, float]:
    """Fractions on 0..1; raw fields from the 1st to the 99th percentile of the data shown."""
    described = METRICS[metric]
    if described.zmin is not None and described.zmax is not None:
        return described.zmin, described.zmax
    finite = matrix[np.isfinite(matrix)]
    if not finite.size:
        return 0.0, 1.0
    low, high = np.percentile(finite, [1, 99])
    return float(low), float(high if high > low else low + 1)


def heatmap(cube: SaturationCube, per_gpu: list[dict], order: list[int], metric: str = "S", *, max_rows: int = PAGE_ROWS,
            max_bins: int = PAGE_BINS) -> go.Figure:
    """GPUs (rows, in ``order``) x time; jobs with more GPUs than ``max_rows`` get consecutive rows merged
    (their mean), long ones merged time bins; the warm-up is shaded."""
    matrix, starts, seconds = rebin(cube.values[metric][order].astype(float), cube.bin_starts, cube.bin_seconds, max_bins)
    matrix, firsts = merge_rows(matrix, max_rows)
    per_row = len(order) / max(len(firsts), 1)
    labels, hosts = [], []
    for position, first in enumerate(firsts):
        last = (firsts[position + 1] - 1) if position + 1 < len(firsts) else len(order) - 1
        gpu = per_gpu[order[first]]
        hosts.append(gpu["host"])
        labels.append(gpu_label(gpu) if first == last else f"{gpu_label(gpu)} … {gpu_label(per_gpu[order[last]])}")
    described = METRICS[metric]
    title = described.title + (f" ({described.unit})" if described.unit else "")
    zmin, zmax = colour_range(matrix, metric)
    times = [_stamp(t) for t in starts]
    figure = go.Figure(go.Heatmap(
        z=np.where(np.isfinite(matrix), np.round(matrix, 3), None).tolist(), x=times, y=labels,
        customdata=[[[host]] * matrix.shape[1] for host in hosts],
        colorscale="Viridis", zmin=zmin, zmax=zmax, colorbar={"title": {"text": title, "side": "right"}},
        hovertemplate="%{y}<br>%{x}<br>" + title + " %{z}<extra></extra>"))
    shapes = []
    if cube.warmup_end is not None and len(starts) and cube.warmup_end > starts[0]:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": times[0], "x1": _stamp(cube.warmup_end), "y0": 0, "y1": 1,
                       "fillcolor": "rgba(255,255,255,0.55)", "line": {"width": 0}})
    rows_note = f"{len(order)} GPUs" + (f", {per_row:.0f} per row" if len(firsts) < len(order) else "")
    figure.update_layout(margin={"l": 200, "r": 20, "t": 10, "b": 40}, height=min(max(260, 11 * len(labels) + 120), 900),
                         shapes=shapes, plot_bgcolor="white",
                         yaxis={"autorange": "reversed", "showticklabels": len(labels) <= 64, "title": rows_note},
                         xaxis={"title": f"time (UTC); warm-up shaded; {int(seconds)} s bins"})
    return figure


def bands(cube: SaturationCube) -> go.Figure:
    """Median across GPUs with the 10-90 % band and the min/max in the hover, for S and each component."""
    figure = go.Figure()
    times = _times(cube)
    for metric, colour in COMPONENT_COLOURS.items():
        values = cube.values[metric].astype(float)
        if not np.isfinite(values).any():
            continue
        with np.errstate(all="ignore"):
            low, mid, high = (np.nanpercentile(values, q, axis=0) for q in (10, 50, 90))
            lowest, highest = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        name = METRICS[metric].title
        visible = True if metric == "S" else "legendonly"
        figure.add_trace(go.Scatter(x=times, y=high.tolist(), line={"width": 0}, showlegend=False, hoverinfo="skip",
                                    legendgroup=metric, visible=visible))
        figure.add_trace(go.Scatter(x=times, y=low.tolist(), fill="tonexty", line={"width": 0}, legendgroup=metric,
                                    fillcolor=_alpha(colour, 0.2), name=f"{name}: 10-90 %", visible=visible, hoverinfo="skip"))
        figure.add_trace(go.Scatter(x=times, y=mid.tolist(), line={"color": colour, "width": 2}, name=f"{name}: median",
                                    legendgroup=metric, visible=visible,
                                    customdata=np.stack([lowest, highest], axis=1).round(3).tolist(),
                                    hovertemplate="median %{y:.3f}<br>min %{customdata[0]}, max %{customdata[1]}<extra>" + name + "</extra>"))
    shapes = []
    if cube.warmup_end is not None and len(times) and cube.warmup_end > cube.bin_starts[0]:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": times[0], "x1": _stamp(cube.warmup_end), "y0": 0, "y1": 1,
                       "fillcolor": "rgba(120,120,120,0.12)", "line": {"width": 0}})
    figure.update_layout(margin={"l": 50, "r": 20, "t": 10, "b": 40}, height=300, yaxis={"range": [0, 1.02], "title": "fraction of ceiling"},
                         legend={"orientation": "h", "y": -0.25}, plot_bgcolor="white", hovermode="x unified", shapes=shapes)
    return figure


def utilisation_vs_saturation(per_gpu: list[dict]) -> go.Figure:
    """Each GPU: how often it was busy (x) against how close its busiest unit ran to its roof (y)."""
    busy = [g["busy"] for g in per_gpu]
    score = [None if g["score"] is None else g["score"] / 100 for g in per_gpu]
    text = [f"{g['host']} GPU {g['gpu']}" + (f", rank {g['rank']}" if g.get("rank") is not None else "") for g in per_gpu]
    colours = ["#d1495b" if g.get("straggler") else "#1f4e79" for g in per_gpu]
    figure = go.Figure(go.Scatter(x=busy, y=score, mode="markers", text=text, marker={"size": 7, "color": colours, "opacity": 0.7},
                                  customdata=[[g["host"]] for g in per_gpu],
                                  hovertemplate="%{text}<br>busy %{x:.2f}, saturation %{y:.2f}<extra></extra>"))
    figure.add_shape(type="rect", x0=0.8, x1=1.02, y0=0, y1=0.3, fillcolor="rgba(209,73,91,0.12)", line={"width": 0})
    figure.add_annotation(x=0.91, y=0.15, text="busy, far from any roof", showarrow=False, font={"size": 11, "color": "#b3261e"})
    figure.update_layout(margin={"l": 50, "r": 20, "t": 10, "b": 40}, height=300, plot_bgcolor="white",
                         xaxis={"range": [0, 1.02], "title": "busy fraction (what GPU utilisation measures)"},
                         yaxis={"range": [0, 1.02], "title": "saturation S"})
    return figure


def _alpha(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    return f"rgba({int(colour[0:2], 16)},{int(colour[2:4], 16)},{int(colour[4:6], 16)},{alpha})"
