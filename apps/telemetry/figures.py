"""Figures of a job's telemetry cube (Plotly figure objects; plain Python, no Django)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .fields import FIELDS, RATIO
from .products import JobCube


def gpu_time_heatmap(cube: JobCube, field_id: int) -> go.Figure:
    """One row per GPU (in the job's node order), one column per time bucket, coloured by the
    field's bucket mean; hovering names the node, GPU, time and value; clicking opens the node."""
    field = FIELDS.get(field_id)
    index = cube.field_index(field_id)
    z = cube.mean[:, index, :] if index is not None else np.full((len(cube.gpus), len(cube.buckets)), np.nan)
    labels = cube.labels()
    unit = field.unit if field else ""
    scale = {"zmin": 0, "zmax": 1} if field and field.unit == RATIO else {}
    customdata = np.repeat(np.asarray(cube.hosts, dtype=object)[:, None], z.shape[1], axis=1)[..., None]
    figure = go.Figure(go.Heatmap(
        z=np.where(np.isnan(z), None, np.round(z.astype(float), 4)).tolist(),
        x=[str(np.datetime_as_string(b, unit="s")) + "Z" for b in cube.buckets],
        y=labels, customdata=customdata.tolist(), colorscale="Viridis", **scale,
        colorbar={"title": {"text": unit, "side": "right"}},
        hovertemplate="%{y}<br>%{x}<br>%{z} " + unit.replace("%", "%%") + "<extra></extra>",
    ))
    height = min(max(240, 12 * len(labels) + 120), 900)
    figure.update_layout(
        margin={"l": 130, "r": 20, "t": 10, "b": 40}, height=height, plot_bgcolor="white",
        yaxis={"autorange": "reversed", "showticklabels": len(labels) <= 64, "title": f"{len(labels)} GPUs"},
        xaxis={"title": f"time (UTC), {cube.step} s buckets"},
    )
    return figure
