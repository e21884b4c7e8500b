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
    shapes, annotations = [], []
    for event in events:
        moment = event["created"].isoformat() if isinstance(event["created"], datetime) else str(event["created"])
        colour = STATE_COLOURS.get(event["to_state"], "#455a64")
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": moment, "x1": moment, "y0": 0, "y1": 1,
                       "line": {"color": colour, "width": 1.5, "dash": "dot"}})
        annotations.append({"x": moment, "y": 1.02, "xref": "x", "yref": "paper", "text": event["to_state"].replace("_", " "),
                            "showarrow": False, "font": {"size": 10, "color": colour}, "textangle": -30})
    figure.update_layout(margin={"l": 150, "r": 20, "t": 40, "b": 40}, height=max(260, 26 * len(evaluations) + 140),
                         plot_bgcolor="white", shapes=shapes, annotations=annotations, legend={"orientation": "h", "y": -0.2},
                         yaxis={"title": "", "categoryorder": "array", "categoryarray": evaluations}, xaxis={"title": "time (UTC)"})
    return figure


def _hover(row: dict) -> str:
    parts = [f"{row['eval_name']}: {row['status']}", f"{row['time']:%Y-%m-%d %H:%M} UTC"]
    if row.get("gpu") is not None:
        parts.append(f"GPU {row['gpu']}")
    if row.get("bandwidth_gbs") is not None:
        parts.append(f"{row['bandwidth_gbs']:.2f} GB/s")
    if row.get("message"):
        parts.append(row["message"][:120])
    return "<br>".join(parts)
