"""Plotly figures of the dragonfly: the whole system, or one group.

Pure: must not import django.

Groups are drawn as a grid of cabinets (rows of ``cabinets_per_row``, as on the machine-room
floor); inside a group, nodes sit in rows by chassis and columns by position in the chassis, and
the group's switches form a small block beside them (row = chassis, column = switch blade).
Only SVG traces are used: WebGL traces need ``unsafe-eval`` in the content security policy.
"""
from dataclasses import dataclass
from math import ceil, sqrt

import plotly.graph_objects as go

from .addresses import AddressError, parse_node_xname
from .model import Topology

STATE_COLOURS = {
    "idle": "#2e7d32",
    "allocated": "#1f77b4",
    "drain": "#f2a900",
    "down": "#c62828",
    "unknown": "#9aa4ae",
}
OVERLAY_COLOUR = "#d1495b"
FOCUS_COLOUR = "#ffb000"  # focused nodes (a straggler) among highlighted ones: amber stars with a dark rim
FOCUS_OUTLINE = "#1b2430"
BACKGROUND_COLOUR = "#d5dbe1"
SWITCH_COLOUR = "#5a6472"
MUTED_COLOUR = "#8a939c"
GROUP_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


@dataclass(frozen=True)
class Layout:
    node_columns: int
    switch_columns: int
    rows: int
    cell_width: float
    cell_height: float
    group_columns: int


def _layout(topology: Topology, groups: list[int]) -> Layout:
    parameters = topology.parameters or {}
    node_columns = int(parameters.get("blades_per_chassis", 7)) * int(parameters.get("nodes_per_blade", 2))
    switch_columns = int(parameters.get("switch_blades_per_chassis", 4))
    rows = int(parameters.get("chassis_per_cabinet", 8))
    largest = max((sum(1 for node in topology.nodes if node.group == g) for g in groups), default=0)
    rows = max(rows, ceil(largest / node_columns) if node_columns else 1)
    group_columns = int(parameters.get("cabinets_per_row") or max(1, ceil(sqrt(len(groups) * 1.5))))
    group_columns = min(group_columns, max(1, len(groups)))
    return Layout(node_columns, switch_columns, rows, node_columns + switch_columns + 2.5, rows + 2.2, group_columns)


def _node_positions(topology: Topology, groups: list[int], layout: Layout) -> dict[str, tuple[float, float]]:
    origin = {group: _origin(position, layout) for position, group in enumerate(groups)}
    placed: dict[str, tuple[float, float]] = {}
    fallback_count: dict[int, int] = {}
    for node in topology.nodes:
        if node.group not in origin:
            continue
        x0, y0 = origin[node.group]
        row = column = None
        if node.xname:
            try:
                xname = parse_node_xname(node.xname)
                row, column = xname.chassis, xname.slot * 2 + xname.board
            except AddressError:
                row = None
        if row is None or column >= layout.node_columns or row >= layout.rows:
            index = fallback_count.get(node.group, 0)
            fallback_count[node.group] = index + 1
            row, column = divmod(index, layout.node_columns)
        placed[node.hostname] = (x0 + column, y0 - row)
    return placed


def _origin(position: int, layout: Layout) -> tuple[float, float]:
    row, column = divmod(position, layout.group_columns)
    return column * layout.cell_width, -row * layout.cell_height


def system_figure(
    topology: Topology,
    *,
    states: dict[str, str] | None = None,
    highlight: set[str] | None = None,
    highlight_label: str = "selected nodes",
    colour_by: str = "state",
    groups: list[int] | None = None,
    labels: dict[str, str] | None = None,
    unlabelled: str = "no label",
    muted_labels: tuple[str, ...] = (),
    hover_notes: dict[str, str] | None = None,
    label_colours: dict[str, str] | None = None,
    focus: set[str] | None = None,
    focus_label: str = "focused",
    link_loads=None,
) -> go.Figure:
    """The system (or only ``groups``) with one marker per node and per switch.

    ``colour_by`` is ``"state"`` (node states from ``states``), ``"group"``, ``"overlay"``
    (nodes in ``highlight`` stand out, the rest fade; the switches their NICs use stand out too),
    or ``"label"`` (a category per node from ``labels``, e.g. the job running on it; nodes
    without one are ``unlabelled`` and fade, ``muted_labels`` are drawn in a neutral grey).
    ``hover_notes`` adds a line per node to its hover text (e.g. the ranks it runs);
    ``label_colours`` fixes the colour of labels that mean something (e.g. vetting states).
    ``focus`` nodes (e.g. a straggler among a job's nodes) are drawn again on top, as larger amber stars
    named ``focus_label`` in the legend, whatever the colouring.
    ``link_loads`` (:class:`apps.core.link_colourings.LinkLoads`) colours switches by their busiest port and draws
    the measured global links between group centres, both on 0-100 % of link capacity (the busiest thickest, on top).
    """
    hover_notes = hover_notes or {}
    groups = sorted(set(groups) if groups is not None else set(topology.groups))
    layout = _layout(topology, groups)
    positions = _node_positions(topology, groups, layout)
    states = states or {}
    highlight = highlight or set()
    nodes = [node for node in topology.nodes if node.hostname in positions]

    labels = labels or {}
    label_order = sorted({label for label in labels.values() if label not in muted_labels},
                         key=lambda label: (-sum(1 for value in labels.values() if value == label), label))
    label_colour = {label: GROUP_PALETTE[index % len(GROUP_PALETTE)] for index, label in enumerate(label_order)}
    label_colour.update(label_colours or {})

    def category(node) -> str:
        if colour_by == "label":
            return labels.get(node.hostname, unlabelled)
        if colour_by == "overlay":
            return highlight_label if node.hostname in highlight else "other nodes"
        if colour_by == "group":
            return f"group {node.group}"
        return states.get(node.hostname, "unknown")

    def colour(name: str) -> str:
        if colour_by == "label":
            return label_colour.get(name, MUTED_COLOUR if name in muted_labels else BACKGROUND_COLOUR)
        if colour_by == "overlay":
            return OVERLAY_COLOUR if name == highlight_label else BACKGROUND_COLOUR
        if colour_by == "group":
            return GROUP_PALETTE[int(name.split()[-1]) % len(GROUP_PALETTE)]
        return STATE_COLOURS.get(name, STATE_COLOURS["unknown"])

    marker_size = 7 if len(groups) > 4 else 12
    figure = go.Figure()
    by_category: dict[str, list] = {}
    for node in nodes:
        by_category.setdefault(category(node), []).append(node)
    rank = {label: index for index, label in enumerate(label_order)}
    order = sorted(by_category, key=lambda name: (name in ("other nodes", unlabelled), name in muted_labels,
                                                  rank.get(name, len(rank)), name not in STATE_COLOURS, name))
    for name in order:
        members = by_category[name]
        figure.add_trace(
            go.Scatter(
                x=[positions[node.hostname][0] for node in members],
                y=[positions[node.hostname][1] for node in members],
                mode="markers",
                name=f"{name} ({len(members)})",
                marker={"symbol": "square", "size": marker_size, "color": colour(name), "line": {"width": 0}},
                customdata=[
                    [node.hostname, node.xname or "", node.group,
                     " ".join(f"{nic.name}→{nic.group}.{nic.switch}:{nic.port}" for nic in node.nics),
                     states.get(node.hostname, "unknown"), hover_notes.get(node.hostname, "")]
                    for node in members
                ],
                hovertemplate="<b>%{customdata[0]}</b> %{customdata[1]}<br>group %{customdata[2]} · %{customdata[4]}"
                              "<br>%{customdata[3]}<br>%{customdata[5]}<extra></extra>",
            )
        )

    focused = [node for node in nodes if node.hostname in (focus or ())]
    if focused:
        figure.add_trace(
            go.Scatter(
                x=[positions[node.hostname][0] for node in focused],
                y=[positions[node.hostname][1] for node in focused],
                mode="markers",
                name=f"{focus_label} ({len(focused)})",
                marker={"symbol": "star", "size": marker_size + 9, "color": FOCUS_COLOUR,
                        "line": {"width": 1.5, "color": FOCUS_OUTLINE}},
                customdata=[[node.hostname, node.xname or "", node.group,
                             " ".join(f"{nic.name}→{nic.group}.{nic.switch}:{nic.port}" for nic in node.nics),
                             states.get(node.hostname, "unknown"), hover_notes.get(node.hostname, "") or focus_label]
                            for node in focused],
                hovertemplate="<b>%{customdata[0]}</b> %{customdata[1]}<br>group %{customdata[2]} · %{customdata[4]}"
                              "<br>%{customdata[3]}<br>%{customdata[5]}<extra></extra>",
            )
        )

    used_switches = {(nic.group, nic.switch) for node in nodes if node.hostname in highlight for nic in node.nics}
    switch_x, switch_y, switch_data, switch_colours = [], [], [], []
    group_origin = {group: _origin(position, layout) for position, group in enumerate(groups)}
    for switch in topology.switches:
        if switch.group not in group_origin:
            continue
        x0, y0 = group_origin[switch.group]
        row, column = divmod(switch.index, layout.switch_columns)
        switch_x.append(x0 + layout.node_columns + 0.8 + column * 0.9)
        switch_y.append(y0 - row)
        switch_data.append([f"switch {switch.group}.{switch.index}", switch.xname or ""])
        switch_colours.append(OVERLAY_COLOUR if (switch.group, switch.index) in used_switches else SWITCH_COLOUR)
    if link_loads is not None:
        _add_link_loads(figure, topology, link_loads, group_origin, layout, switch_x, switch_y, switch_data, marker_size)
        switch_x, switch_y, switch_data, switch_colours = _unmeasured(topology, group_origin, link_loads, switch_x,
                                                                      switch_y, switch_data, switch_colours)
    figure.add_trace(
        go.Scatter(
            x=switch_x, y=switch_y, mode="markers", name=f"switches{' not measured' if link_loads is not None else ''} ({len(switch_x)})",
            marker={"symbol": "diamond", "size": marker_size - 1, "color": switch_colours, "line": {"width": 0}},
            customdata=switch_data, hovertemplate="<b>%{customdata[0]}</b> %{customdata[1]}<extra></extra>",
        )
    )
    cabinets = {}
    for node in nodes:
        cabinets.setdefault(node.group, node.cabinet)
    for group, (x0, y0) in group_origin.items():
        label = f"group {group}" + (f" · {cabinets[group]}" if cabinets.get(group) else "")
        figure.add_annotation(x=x0 - 0.4, y=y0 + 1.1, text=label, showarrow=False, xanchor="left",
                              font={"size": 11 if len(groups) > 4 else 14, "color": "#1b2430"})
    rows = ceil(len(groups) / layout.group_columns)
    # The axes keep a 1:1 aspect, so size the figure for a ~1200 px wide panel; otherwise the
    # drawing floats in empty space above and below.
    aspect = (rows * layout.cell_height) / (layout.group_columns * layout.cell_width)
    figure.update_layout(
        height=int(min(1400, max(320, 1200 * aspect + 70))),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        showlegend=True,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        xaxis={"visible": False, "fixedrange": False},
        yaxis={"visible": False, "scaleanchor": "x", "scaleratio": 1},
        hovermode="closest",
        dragmode="pan",
    )
    return figure


# Load on a physical scale: 0-100 % of link capacity, in five steps; the busiest are drawn last, thickest and darkest.
LOAD_SCALE = [[0.0, "#fee8c8"], [0.4, "#fdbb84"], [0.7, "#e34a33"], [1.0, "#7f0000"]]
LOAD_BINS = [(0.0, 0.2, "#d5dbe1", 0.6), (0.2, 0.4, "#fdd49e", 1.5), (0.4, 0.6, "#fc8d59", 2.5),
             (0.6, 0.8, "#d7301f", 4.0), (0.8, float("inf"), "#7f0000", 6.0)]


def _group_centre(origin: tuple[float, float], layout: Layout) -> tuple[float, float]:
    return origin[0] + layout.node_columns / 2, origin[1] - (layout.rows - 1) / 2


def _switch_key(datum) -> tuple[int, int]:
    group, index = datum[0].split()[-1].split(".")
    return int(group), int(index)


def _add_link_loads(figure, topology, loads, group_origin, layout, switch_x, switch_y, switch_data, marker_size):
    """Measured global links as lines between group centres (binned by load), a hover marker at each line's
    middle with the colour bar, and the measured switches coloured by their busiest port."""
    centres = {group: _group_centre(origin, layout) for group, origin in group_origin.items()}
    pairs = [(pair, value) for pair, value in loads.pairs.items() if pair[0] in centres and pair[1] in centres]
    for low, high, colour, width in LOAD_BINS:
        members = [(pair, value) for pair, value in pairs if low <= value < high]
        if not members:
            continue
        xs, ys = [], []
        for (a, b), _value in members:
            xs += [centres[a][0], centres[b][0], None]
            ys += [centres[a][1], centres[b][1], None]
        label = f"global links {int(low * 100)}-{int(high * 100)} %" if high != float("inf") else f"global links ≥ {int(low * 100)} %"
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"{label} ({len(members)})", hoverinfo="skip",
                                    line={"color": colour, "width": width}, opacity=0.9 if low >= 0.4 else 0.5))
    if pairs:
        ordered = sorted(pairs, key=lambda item: item[1])
        figure.add_trace(go.Scatter(
            x=[(centres[a][0] + centres[b][0]) / 2 for (a, b), _ in ordered],
            y=[(centres[a][1] + centres[b][1]) / 2 for (a, b), _ in ordered],
            mode="markers", name="group pair load", showlegend=False,
            marker={"size": 6, "color": [round(100 * value, 1) for _, value in ordered], "colorscale": LOAD_SCALE,
                    "cmin": 0, "cmax": 100, "line": {"width": 0},
                    "colorbar": {"title": {"text": "% of link<br>capacity"}, "thickness": 12, "len": 0.6}},
            customdata=[[f"group {a} ↔ {b}", round(100 * value, 1), loads.notes.get((a, b), "")] for (a, b), value in ordered],
            hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]} % of its global links<br>%{customdata[2]}<extra></extra>"))
    measured = [(x, y, datum) for x, y, datum in zip(switch_x, switch_y, switch_data) if _switch_key(datum) in loads.switches]
    if measured:
        measured.sort(key=lambda item: loads.switches[_switch_key(item[2])])
        figure.add_trace(go.Scatter(
            x=[x for x, _, _ in measured], y=[y for _, y, _ in measured], mode="markers",
            name=f"switches by busiest port ({len(measured)})",
            marker={"symbol": "diamond", "size": marker_size + 1, "cmin": 0, "cmax": 100, "colorscale": LOAD_SCALE,
                    "color": [round(100 * loads.switches[_switch_key(datum)], 1) for _, _, datum in measured],
                    "line": {"width": 0.5, "color": "#1b2430"}},
            customdata=[[*datum, round(100 * loads.switches[_switch_key(datum)], 1)] for _, _, datum in measured],
            hovertemplate="<b>%{customdata[0]}</b> %{customdata[1]}<br>busiest port at %{customdata[2]} % of a link<extra></extra>"))


def _unmeasured(topology, group_origin, loads, switch_x, switch_y, switch_data, switch_colours):
    keep = [index for index, datum in enumerate(switch_data) if _switch_key(datum) not in loads.switches]
    return ([switch_x[i] for i in keep], [switch_y[i] for i in keep], [switch_data[i] for i in keep],
            [BACKGROUND_COLOUR for _ in keep])
