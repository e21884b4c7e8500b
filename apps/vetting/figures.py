"""Figures of the vetting pages: failures per node and day, a node's timeline. Plotly figure objects.

Plain Python: no Django.
"""
from __future__ import annotations

from datetime import date, datetime

import plotly.graph_objects as go

# Drawn in this order, so a failure is never hidden under a pass or a skip of the same moment.
OUTCOME_COLOURS = {"skipped": "#9e9e9e", "unknown": "#607d8b", "pass": "#2e7d32", "warn": "#ed8b00", "fail": "#c62828",
                   "critical": "#6a1b9a"}
STATE_COLOURS = {"healthy": "#2e7d32", "suspect": "#ed8b00", "drain_recommended": "#d84315", "drained": "#c62828",
                 "in_repair": "#6a1b9a", "returned": "#1565c0"}


def failures_heatmap(hosts: list[str], days: list[date], cells: dict) -> go.Figure:
    """Nodes (rows, most failures first) x days; colour = failed results, hover = failed of all."""
    z, text = [], []
    for host in hosts:
        row_z, row_text = [], []
        for day in days:
            failed, total = cells.get((host, day), (0, 0))
            row_z.append(failed if total else None)
            row_text.append(f"{host} {day:%Y-%m-%d}: {failed} failed of {total}" if total else f"{host} {day:%Y-%m-%d}: not vetted")
        z.append(row_z)
        text.append(row_text)
    figure = go.Figure(go.Heatmap(
        z=z, x=[day.isoformat() for day in days], y=hosts, text=text, hoverinfo="text", customdata=[[[host]] * len(days) for host in hosts],
        colorscale=[[0, "#e8f5e9"], [0.001, "#ffcdd2"], [1, "#b71c1c"]], zmin=0, colorbar={"title": {"text": "failed results"}},
        xgap=1, ygap=1))
    figure.update_layout(margin={"l": 90, "r": 20, "t": 10, "b": 40}, height=min(max(220, 18 * len(hosts) + 90), 820),
                         plot_bgcolor="white", yaxis={"autorange": "reversed", "title": f"{len(hosts)} nodes with failures"},
                         xaxis={"title": "day (UTC); blank: not vetted"})
    return figure


def node_timeline(results: list[dict], events: list[dict]) -> go.Figure:
    """Each result of one node: time (x) by evaluation (y), coloured by outcome; health changes as lines."""
    figure = go.Figure()
    evaluations = sorted({row["eval_name"] for row in results})
    for outcome, colour in OUTCOME_COLOURS.items():
        rows = [row for row in results if row["outcome"] == outcome]
        if not rows:
            continue
        figure.add_trace(go.Scatter(
            x=[row["time"].isoformat() for row in rows], y=[row["eval_name"] for row in rows], mode="markers", name=outcome,
            marker={"color": colour, "size": 9 if outcome != "pass" else 6, "symbol": "x" if outcome in ("fail", "critical") else "circle"},
            text=[_hover(row) for row in rows], hoverinfo="text"))
    shapes = []
    for event in events:
        moment = _moment(event["created"])
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": moment, "x1": moment, "y0": 0, "y1": 1,
                       "line": {"color": STATE_COLOURS.get(event["to_state"], "#455a64"), "width": 1.5, "dash": "dot"}})
    times = [row["time"] for row in results] + [event["created"] for event in events if isinstance(event["created"], datetime)]
    annotations, lanes = state_labels(events, span=(min(times), max(times)) if times else None)
    top = 24 + LABEL_LANE_PX * max(lanes, 1)
    figure.update_layout(margin={"l": 150, "r": 20, "t": top, "b": 40}, height=max(260, 26 * len(evaluations) + 116 + top),
                         plot_bgcolor="white", shapes=shapes, annotations=annotations, legend={"orientation": "h", "y": -0.2},
                         yaxis={"title": "", "categoryorder": "array", "categoryarray": evaluations}, xaxis={"title": "time (UTC)"})
    return figure


LABEL_LANE_PX = 15  # one line of a health-change label (font 10 px)
LABEL_PLOT_PX = 360  # the narrowest plot width the labels are laid out for (a phone's; wider screens leave more room)
LABEL_CHAR_PX = 6.2  # a character of the label's font, about


def _moment(value) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _seconds(value) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return 0.0


def state_labels(events: list[dict], *, span=None) -> tuple[list[dict], int]:
    """The labels of a node's health changes above the timeline, laid out so that none overlaps another: the changes
    of one moment (closer than two pixels) share one label, one line each in the order they happened ("drain recommended", "drained", "in
    repair"), and a label that would run into an earlier one (changes close in time) goes up a lane. Returns the
    annotations and the number of lanes of lines they use (the figure's top margin makes room for them).

    ``span`` (first, last time on the x axis) turns a label's width in pixels into time, at ``LABEL_PLOT_PX``."""
    seconds_per_px = 0.0
    if span and isinstance(span[0], datetime) and span[1] > span[0]:
        seconds_per_px = (span[1] - span[0]).total_seconds() / LABEL_PLOT_PX
    together = max(seconds_per_px * 2, 1.0)  # changes closer than this share a moment (one transaction, one pixel)
    groups: list[list[dict]] = []
    for event in sorted(events, key=lambda e: _seconds(e["created"])):
        if groups and _seconds(event["created"]) - _seconds(groups[-1][0]["created"]) <= together:
            groups[-1].append(event)
        else:
            groups.append([event])
    placed: list[tuple[float, float, int, int]] = []  # (left s, right s, first line, lines) of the labels placed
    annotations, top = [], 0
    for group in groups:
        moment = _moment(group[0]["created"])
        lines = [event["to_state"].replace("_", " ") for event in group]
        centre = _seconds(group[0]["created"])
        half = (max(len(line) for line in lines) * LABEL_CHAR_PX + 8) / 2 * seconds_per_px
        left, right = centre - half, centre + half
        first = 0
        while any(l0 < right and left < r0 and first < f0 + n0 and f0 < first + len(lines) for l0, r0, f0, n0 in placed):
            first += 1
        placed.append((left, right, first, len(lines)))
        top = max(top, first + len(lines))
        colour = STATE_COLOURS.get(group[-1]["to_state"], "#455a64")
        text = "<br>".join(f'<span style="color:{STATE_COLOURS.get(event["to_state"], "#455a64")}">{line}</span>'
                           for event, line in zip(reversed(group), reversed(lines)))  # the latest change on top
        annotations.append({"x": moment, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom", "yshift": 2 + first * LABEL_LANE_PX,
                            "text": text, "showarrow": False, "align": "center", "font": {"size": 10, "color": colour},
                            "bgcolor": "rgba(255,255,255,0.85)", "borderpad": 0})
    return annotations, top


def _hover(row: dict) -> str:
    parts = [f"{row['eval_name']}: {row['status']}", f"{row['time']:%Y-%m-%d %H:%M} UTC"]
    if row.get("gpu") is not None:
        parts.append(f"GPU {row['gpu']}")
    if row.get("bandwidth_gbs") is not None:
        parts.append(f"{row['bandwidth_gbs']:.2f} GB/s")
    if row.get("message"):
        parts.append(row["message"][:120])
    return "<br>".join(parts)
