"""Figures of the catalogue: the explorer's time series and a product's gap timeline.

Plain Python (pandas, Plotly): no Django.
"""
from __future__ import annotations

import math
from datetime import datetime

import pandas as pd
import plotly.graph_objects as go

MAX_LINES = 20  # beyond this many groups a plot shows the median, the 10-90 % band and min-max across them
COLOURS = ["#1f4e79", "#c75000", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64"]


def series_figure(frame: pd.DataFrame, *, group_by: str, stat: str, labels: dict[int, str], title: str = "",
                  window: tuple | None = None) -> tuple[go.Figure, str]:
    """``frame``: aggregated telemetry (bucket, host, gpu, field, ``stat``). One line per group (host, host/GPU,
    field, or all together); with more than MAX_LINES groups, the median across groups with its 10-90 % band.
    Returns the figure and a sentence saying what it shows."""
    figure = go.Figure()
    figure.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 40 if title else 10, "b": 40}, height=460,
                         title=title or None, hovermode="x unified", legend={"orientation": "h", "y": -0.15},
                         xaxis_title="time (UTC)")
    if window:  # the whole window, so a node that fell silent shows as a line that stops
        figure.update_xaxes(range=[pd.Timestamp(window[0]).isoformat(), pd.Timestamp(window[1]).isoformat()])
    if frame is None or frame.empty:
        return empty_figure("no samples in this window", window=window), "No samples in this window."
    frame = frame.copy()
    fields = sorted(frame["field"].unique())
    if group_by == "host":
        frame["group"] = frame["host"]
    elif group_by == "gpu":
        frame["group"] = frame["host"] + "/" + frame["gpu"].astype(str)
    else:
        frame["group"] = "all"
    sentence = []
    for index, field in enumerate(fields):
        part = frame[frame["field"] == field]
        per_group = part.groupby(["group", "bucket"], as_index=False)[stat].mean()
        groups = per_group["group"].nunique()
        colour = COLOURS[index % len(COLOURS)]
        label = labels.get(int(field), str(field))
        axis = "y" if index == 0 else "y2"
        if group_by in ("field", "none") or groups == 1:
            line = per_group.groupby("bucket")[stat].mean()
            figure.add_trace(go.Scatter(x=line.index, y=line.to_numpy(), name=label, line={"color": colour}, yaxis=axis))
            sentence.append(f"{label}: {stat} over {part['host'].nunique():,} node(s)")
        elif groups <= MAX_LINES:
            for number, (group, rows) in enumerate(per_group.groupby("group")):
                figure.add_trace(go.Scatter(x=rows["bucket"], y=rows[stat], name=f"{group} {label}", yaxis=axis,
                                            line={"width": 1.5, "dash": "solid" if index == 0 else "dot"},
                                            legendgroup=label))
            sentence.append(f"{label}: one line per {group_by} ({groups})")
        else:
            band = spread(per_group, stat)
            silent = int(band["silent"].iloc[-2 if len(band) > 1 else -1])  # the last full bucket: the newest may be filling
            figure.add_trace(go.Scatter(x=band.index, y=band["max"].to_numpy(), line={"width": 1, "color": _rgba(colour, 0.5)},
                                        yaxis=axis, name=f"{label} max", legendgroup=f"{label} range"))
            figure.add_trace(go.Scatter(x=band.index, y=band[0.9].to_numpy(), line={"width": 0}, showlegend=False, hoverinfo="skip",
                                        yaxis=axis))
            figure.add_trace(go.Scatter(x=band.index, y=band[0.1].to_numpy(), fill="tonexty", line={"width": 0}, yaxis=axis,
                                        fillcolor=_rgba(colour, 0.18), name=f"{label} 10-90 % of {groups:,} {group_by}s"))
            figure.add_trace(go.Scatter(x=band.index, y=band[0.5].to_numpy(), line={"color": colour}, yaxis=axis,
                                        name=f"{label} median"))
            figure.add_trace(go.Scatter(x=band.index, y=band["min"].to_numpy(), line={"width": 1.5, "color": SILENT_COLOUR, "dash": "dot"},
                                        yaxis=axis, name=f"{label} min (silent = 0)", customdata=band["silent"].to_numpy(),
                                        hovertemplate="%{y} (%{customdata} silent)"))
            said = f"{silent:,} {group_by}{'s' if silent != 1 else ''} silent at the end" if silent else "none silent"
            sentence.append(f"{label}: median, 10-90 % band and min-max across {groups:,} {group_by}s, a silent one counted as 0 "
                            f"({said}; name some to see their own lines)")
    figure.update_yaxes(title_text=labels.get(int(fields[0]), str(fields[0])))
    if len(fields) > 1:
        figure.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": labels.get(int(fields[1]), str(fields[1])),
                                     "showgrid": False})
    return figure, "; ".join(sentence) + "."


SILENT_COLOUR = "#c62828"


def spread(per_group: pd.DataFrame, stat: str) -> pd.DataFrame:
    """Per bucket, across groups: min, the 10/50/90 % quantiles, max, and how many groups sent nothing (``silent``).
    A group that sent nothing in a bucket after its first sample of the window counts as 0 there, so a member
    that fell silent pulls the minimum to zero instead of vanishing from the band; before its first sample it
    does not count (a node that began reporting, or a window that starts before its data, is not silent)."""
    grid = per_group.pivot_table(index="bucket", columns="group", values=stat, aggfunc="mean").sort_index()
    present = grid.notna()
    stopped = ~present & present.cummax()
    silent = stopped.sum(axis=1)
    grid = grid.mask(stopped, 0.0)
    out = grid.quantile([0.1, 0.5, 0.9], axis=1).T
    out["min"], out["max"], out["silent"] = grid.min(axis=1), grid.max(axis=1), silent
    return out


def bucket_count(start: datetime, end: datetime, step: int) -> int:
    """How many buckets of ``step`` seconds the window from ``start`` to ``end`` spans (a partial one counts)."""
    return max(0, math.ceil((end - start).total_seconds() / step))


def window_note(start: datetime, end: datetime, step: int, rows: int) -> str:
    """"58 buckets of 60 s from … to … UTC (400 rows read)": buckets from the window, rows from the store."""
    buckets = bucket_count(start, end, step)
    return (f"{buckets:,} bucket{'s' if buckets != 1 else ''} of {step} s from {start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC "
            f"({rows:,} row{'s' if rows != 1 else ''} read).")


def empty_figure(message: str, *, window: tuple | None = None) -> go.Figure:
    """A figure with nothing to plot: the message alone, no axes (never an empty grid from -1 to 6)."""
    figure = go.Figure()
    figure.update_layout(template="plotly_white", margin={"l": 20, "r": 20, "t": 20, "b": 20}, height=460,
                         xaxis={"visible": False}, yaxis={"visible": False})
    figure.add_annotation(text=message, showarrow=False, font={"size": 16}, xref="paper", yref="paper", x=0.5, y=0.5)
    return figure


def _rgba(colour: str, alpha: float) -> str:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def gap_timeline(gaps: list[dict], *, start: str, end: str, limit: int = 40) -> go.Figure:
    """The gaps of one check as bars on a time axis, one row per member (ongoing gaps in red)."""
    figure = go.Figure()
    rows = gaps[:limit]
    members = sorted({gap["member"] for gap in rows})
    for ongoing, colour, name in ((False, "#ed8b00", "gap (closed)"), (True, "#c62828", "silent now")):
        chosen = [gap for gap in rows if gap["ongoing"] == ongoing]
        if not chosen:
            continue
        starts = pd.to_datetime([gap["start"] for gap in chosen], utc=True)
        ends = pd.to_datetime([gap["end"] for gap in chosen], utc=True)
        figure.add_trace(go.Bar(base=starts, x=(ends - starts).total_seconds() * 1000, y=[gap["member"] for gap in chosen],
                                orientation="h", marker_color=colour, name=name,
                                hovertemplate="%{y}: %{base|%H:%M} for %{customdata}<extra></extra>",
                                customdata=[_minutes(gap["seconds"]) for gap in chosen]))
    figure.update_layout(template="plotly_white", barmode="overlay", height=max(180, 26 * len(members) + 80),
                         margin={"l": 90, "r": 20, "t": 10, "b": 40}, legend={"orientation": "h", "y": -0.25},
                         xaxis={"type": "date", "range": [start, end], "title": "time (UTC)"},
                         yaxis={"categoryorder": "category descending", "automargin": True})
    return figure


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
