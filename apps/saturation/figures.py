"""Figures of a job's saturation product (Plotly figure objects; plain Python, no Django)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .products import SaturationCube

METRIC_TITLES = {"S": "saturation S", "C": "compute C", "M": "memory M", "L": "link L", "busy": "busy (utilisation)",
                 "clock_factor": "SM clock / max", "S_busy": "saturation while busy"}
COMPONENT_COLOURS = {"S": "#1f4e79", "C": "#d1495b", "M": "#edae49", "L": "#00798c"}


def _times(cube: SaturationCube) -> list[str]:
    return [str(np.datetime_as_string(t, unit="s")) + "Z" for t in cube.bin_starts]


def heatmap(cube: SaturationCube, per_gpu: list[dict], order: list[int], metric: str = "S") -> go.Figure:
    matrix = cube.values[metric][order]
    labels = []
    for i in order:
        gpu = per_gpu[i]
        prefix = f"rank {gpu['rank']} · " if gpu.get("rank") is not None else ""
        labels.append(f"{prefix}{gpu['host']} GPU {gpu['gpu']}")
    figure = go.Figure(go.Heatmap(
        z=np.where(np.isfinite(matrix), np.round(matrix.astype(float), 3), None).tolist(), x=_times(cube), y=labels,
        customdata=[[[per_gpu[i]["host"]]] * matrix.shape[1] for i in order],
        colorscale="Viridis", zmin=0, zmax=1, colorbar={"title": {"text": METRIC_TITLES.get(metric, metric), "side": "right"}},
        hovertemplate="%{y}<br>%{x}<br>" + METRIC_TITLES.get(metric, metric) + " %{z}<extra></extra>"))
    shapes = []
    if cube.warmup_end is not None and len(cube.bin_starts) and cube.warmup_end > cube.bin_starts[0]:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": _times(cube)[0],
                       "x1": str(np.datetime_as_string(cube.warmup_end, unit="s")) + "Z", "y0": 0, "y1": 1,
                       "fillcolor": "rgba(255,255,255,0.55)", "line": {"width": 0}})
    figure.update_layout(margin={"l": 190, "r": 20, "t": 10, "b": 40}, height=min(max(260, 11 * len(labels) + 120), 900),
                         shapes=shapes, plot_bgcolor="white",
                         yaxis={"autorange": "reversed", "showticklabels": len(labels) <= 64, "title": f"{len(labels)} GPUs"},
                         xaxis={"title": f"time (UTC); warm-up shaded; {int(cube.bin_seconds)} s bins"})
    return figure


def bands(cube: SaturationCube) -> go.Figure:
    """Median across GPUs with the 10-90 % band, for S and each component."""
    figure = go.Figure()
    times = _times(cube)
    for metric, colour in COMPONENT_COLOURS.items():
        values = cube.values[metric].astype(float)
        if not np.isfinite(values).any():
            continue
        with np.errstate(all="ignore"):
            low, mid, high = (np.nanpercentile(values, q, axis=0) for q in (10, 50, 90))
            lowest, highest = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        name = METRIC_TITLES[metric]
        visible = True if metric == "S" else "legendonly"
        figure.add_trace(go.Scatter(x=times, y=high.tolist(), line={"width": 0}, showlegend=False, hoverinfo="skip",
                                    legendgroup=metric, visible=visible))
        figure.add_trace(go.Scatter(x=times, y=low.tolist(), fill="tonexty", line={"width": 0}, legendgroup=metric,
                                    fillcolor=_alpha(colour, 0.2), name=f"{name}: 10-90 %", visible=visible, hoverinfo="skip"))
        figure.add_trace(go.Scatter(x=times, y=mid.tolist(), line={"color": colour, "width": 2}, name=f"{name}: median",
                                    legendgroup=metric, visible=visible,
                                    customdata=np.stack([lowest, highest], axis=1).round(3).tolist(),
                                    hovertemplate="median %{y:.3f}<br>min %{customdata[0]}, max %{customdata[1]}<extra>" + name + "</extra>"))
    figure.update_layout(margin={"l": 50, "r": 20, "t": 10, "b": 40}, height=300, yaxis={"range": [0, 1.02], "title": "fraction of ceiling"},
                         legend={"orientation": "h", "y": -0.25}, plot_bgcolor="white", hovermode="x unified")
    return figure


def utilisation_vs_saturation(per_gpu: list[dict]) -> go.Figure:
    """Each GPU: how often it was busy (x) against how close its busiest unit ran to its roof (y)."""
    busy = [g["busy"] for g in per_gpu]
    score = [None if g["score"] is None else g["score"] / 100 for g in per_gpu]
    text = [f"{g['host']} GPU {g['gpu']}" + (f", rank {g['rank']}" if g.get("rank") is not None else "") for g in per_gpu]
    figure = go.Figure(go.Scatter(x=busy, y=score, mode="markers", text=text, marker={"size": 7, "color": "#1f4e79", "opacity": 0.7},
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
