"""Where each node and switch of the machine is drawn on the system page: the topology page's drawing
(``apps.topology.figures.system_figure``, groups as cabinets, nodes by chassis and slot), reduced to
compact arrays that the page colours in the browser (so switching the colouring needs no new figure).

Plain Python: no Django.
"""
from __future__ import annotations

from apps.topology.figures import system_figure
from apps.topology.model import Topology


def _short(value: float) -> float | int:
    value = round(float(value), 2)
    return int(value) if value.is_integer() else value


def map_layout(topology: Topology) -> dict:
    """``hosts`` with their ``x``/``y`` (one entry per node, in the drawing's order), the switches
    (``x``/``y``/``names``), the group labels and the figure height the topology page uses."""
    figure = system_figure(topology, colour_by="group")
    hosts, xs, ys = [], [], []
    switches = {"x": [], "y": [], "names": []}
    for trace in figure.data:
        custom = list(trace.customdata or [])
        if not custom:
            continue
        if str(custom[0][0]).startswith("switch "):
            switches["x"] = [_short(x) for x in trace.x]
            switches["y"] = [_short(y) for y in trace.y]
            switches["names"] = [str(row[0]).removeprefix("switch ") for row in custom]
            continue
        for row, x, y in zip(custom, trace.x, trace.y):
            hosts.append(str(row[0]))
            xs.append(_short(x))
            ys.append(_short(y))
    labels = [{"x": _short(a.x), "y": _short(a.y), "text": a.text} for a in figure.layout.annotations or ()]
    return {"hosts": hosts, "x": xs, "y": ys, "switches": switches, "labels": labels,
            "height": int(figure.layout.height or 600)}
