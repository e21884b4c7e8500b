"""Figures of a job's saturation product: Plotly figure objects. Plain Python: no Django."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .products import METRICS, SaturationCube

COMPONENT_COLOURS = {"S": "#1f4e79", "C": "#d1495b", "M": "#edae49", "L": "#00798c"}


def _stamp(t) -> str:
    return str(np.datetime_as_string(t, unit="s")) + "Z"


def _times(cube: SaturationCube) -> list[str]:
    return [_stamp(t) for t in cube.bin_starts]


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
        for trace in band_traces(times, low, high, colour, f"{name}: 10-90 %", metric, visible, 0.3):
            figure.add_trace(trace)
        figure.add_trace(go.Scatter(x=times, y=mid.tolist(), line={"color": colour, "width": 2}, name=f"{name}: median",
                                    legendgroup=metric, visible=visible,
                                    customdata=np.stack([lowest, highest], axis=1).round(3).tolist(),
                                    hovertemplate="median %{y:.3f}<br>min %{customdata[0]}, max %{customdata[1]}<extra>" + name + "</extra>"))
    shapes = []
    if cube.warmup_end is not None and len(times) and cube.warmup_end > cube.bin_starts[0]:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": times[0], "x1": _stamp(cube.warmup_end), "y0": 0, "y1": 1,
                       "fillcolor": "rgba(120,120,120,0.12)", "line": {"width": 0}})
    figure.update_layout(margin={"l": 50, "r": 10, "t": 10, "b": 40}, height=360, yaxis={"range": [0, 1.02], "title": "fraction of ceiling"},
                         legend=LEGEND_ABOVE, plot_bgcolor="white", hovermode="x unified", shapes=shapes, template="none")
    return figure


# Above the plot, outside it: a legend below the plot covered the time axis (its ticks and the date under them).
# Plotly widens the top margin to fit it, however many rows it wraps into at the figure's width.
LEGEND_ABOVE = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom", "font": {"size": 10}}


def band_runs(low, high) -> list[tuple[int, int]]:
    """(first, last) bin of each run of bins where both edges of a band are known."""
    known = np.isfinite(np.asarray(low, dtype=float)) & np.isfinite(np.asarray(high, dtype=float))
    edges = np.diff(np.concatenate(([0], known.astype("int8"), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def band_traces(times: list, low, high, colour: str, name: str, group: str, visible, alpha: float) -> list[go.Scatter]:
    """A band between ``low`` and ``high`` (per bin, NaN where unknown): the fill as one closed polygon per run of
    known bins (the upper edge forwards, the lower edge back), the runs separated by gaps in one trace, and both
    edges dotted, broken where a bin is unknown. Plotly's fill="tonexty" between two traces with gaps bridged a
    missing bin and drew wedges between unrelated points; a polygon fills exactly the band and nothing else."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    xs: list = []
    ys: list = []
    for first, last in band_runs(low, high):
        if xs:
            xs.append(None)
            ys.append(None)
        span = slice(first, last + 1)
        xs += times[span] + times[span][::-1]
        ys += high[span].tolist() + low[span][::-1].tolist()
    edge = {"width": 1, "dash": "dot", "color": colour}
    # The band's edges are drawn (dotted) so a narrow band still shows beside the median's line.
    return [go.Scatter(x=xs, y=ys, fill="toself", fillcolor=_alpha(colour, alpha), mode="lines", line={"width": 0},
                       name=name, legendgroup=group, visible=visible, hoverinfo="skip"),
            *(go.Scatter(x=times, y=[None if not np.isfinite(v) else float(v) for v in edge_values], mode="lines",
                         line=edge, connectgaps=False, showlegend=False, legendgroup=group, visible=visible,
                         hoverinfo="skip") for edge_values in (high, low))]


def utilisation_vs_saturation(per_gpu: list[dict]) -> go.Figure:
    """Each GPU: how often it was busy (x) against how close its busiest unit ran to its roof (y).

    GPUs that land on the same spot (to 0.01) share one dot whose area grows with their number, so
    512 equal GPUs do not collapse into what looks like one; stragglers always get their own red dot."""
    spots: dict[tuple, list[dict]] = {}
    for g in per_gpu:
        if g.get("busy") is None or g.get("score") is None:
            continue
        key = (round(g["busy"], 2), round(g["score"] / 100, 2), bool(g.get("straggler")))
        spots.setdefault(key, []).append(g)
    xs, ys, sizes, colours, text, hosts = [], [], [], [], [], []
    for (busy, score, straggler), members in spots.items():
        first = members[0]
        name = f"{first['host']} GPU {first['gpu']}" + (f", rank {first['rank']}" if first.get("rank") is not None else "")
        xs.append(busy)
        ys.append(score)
        sizes.append(7 + 3 * np.sqrt(len(members) - 1))
        colours.append("#d1495b" if straggler else "#1f4e79")
        text.append(name if len(members) == 1 else f"{len(members):,} GPUs, e.g. {name}")
        hosts.append([first["host"]])
    figure = go.Figure(go.Scatter(x=xs, y=ys, mode="markers", text=text, marker={"size": sizes, "color": colours, "opacity": 0.6,
                                                                                   "line": {"width": 0.5, "color": "white"}},
                                  customdata=hosts, hovertemplate="%{text}<br>busy %{x:.2f}, saturation %{y:.2f}<extra></extra>"))
    figure.add_shape(type="rect", x0=0.8, x1=1.02, y0=0, y1=0.3, fillcolor="rgba(209,73,91,0.12)", line={"width": 0})
    figure.add_annotation(x=0.91, y=0.15, text="busy, far from any roof", showarrow=False, font={"size": 11, "color": "#b3261e"})
    figure.update_layout(margin={"l": 50, "r": 20, "t": 10, "b": 40}, height=320, plot_bgcolor="white", template="none",
                         xaxis={"range": [0, 1.02], "title": "busy fraction (what GPU utilisation measures)"},
                         yaxis={"range": [0, 1.02], "title": "saturation S"})
    return figure


def _alpha(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    return f"rgba({int(colour[0:2], 16)},{int(colour[2:4], 16)},{int(colour[4:6], 16)},{alpha})"
