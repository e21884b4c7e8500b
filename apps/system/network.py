"""Network load per dragonfly group pair and file-system load of the running jobs, for the system page.

Plain Python: no Django. The selectors read the switch port counters (the telemetry store's network table),
turn them into rates (``apps.telemetry.fabric.counter_rates``) and loads per group pair
(``apps.topology.link_load``), and hand them here with the running jobs' groups; this module says it in words
(the verdict first) and lays out the group × group matrix.

What the numbers are: a group pair's load is its busier direction's bytes per second over the capacity of its
global links in that direction (links × 25 GB/s), measured over the last minutes of counters; 100 % = every
link of the pair full. Jobs "sharing" a pair are the running jobs with nodes in both of its groups (traffic
between groups may also be routed through a third group: adaptive routing; counters cannot say whose bytes).
"""
from __future__ import annotations

from typing import Iterable, Mapping

from apps.topology.link_load import LinkLoad

NO_COUNTERS = "no switch port counters in the last {minutes} minutes: network load is unknown"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.0f} %"


def sharing_jobs(pair: tuple[int, int], job_groups: Mapping[str, Iterable[int]]) -> list[str]:
    """Labels of the jobs with nodes in both groups of ``pair``, in the given order."""
    a, b = pair
    return [label for label, groups in job_groups.items() if a in set(groups) and b in set(groups)]


def _names(labels: list[str]) -> str:
    if len(labels) <= 2:
        return " and ".join(labels)
    return f"{', '.join(labels[:2])} and {len(labels) - 2} more"


def network_summary(load: LinkLoad | None, groups: list[int], job_groups: Mapping[str, Iterable[int]], *,
                    minutes: int) -> dict:
    """The verdict, coverage line, the matrix (``z`` in percent, None where unmeasured) and the busiest pairs."""
    if load is None or not load.pairs:
        return {"verdict": None, "note": NO_COUNTERS.format(minutes=minutes), "matrix": None, "busiest": [], "per_group": {}}
    ranked = sorted((pair for pair in load.pairs.values() if pair.fraction is not None),
                    key=lambda pair: (-pair.fraction, pair.a, pair.b))
    top = ranked[0]
    shared = sharing_jobs((top.a, top.b), job_groups)
    verdict = f"Busiest: group {top.a} ↔ {top.b} at {_pct(top.fraction)} of its links"
    verdict += f", shared by {'job' if len(shared) == 1 else 'jobs'} {_names(shared)}" if shared else ", no running job spans both groups"
    index = {group: position for position, group in enumerate(groups)}
    z = [[None] * len(groups) for _ in groups]
    for pair in ranked:
        if pair.a in index and pair.b in index:
            value = round(100 * pair.fraction, 1)
            z[index[pair.a]][index[pair.b]] = z[index[pair.b]][index[pair.a]] = value
    measured = len(ranked)
    note = (f"{measured} of {len(load.pairs) if load.pairs else 0} group pairs measured from {load.ports_measured:,} "
            f"switch ports over the last {minutes} minutes")
    if load.ports_unplaced:
        note += f"; {load.ports_unplaced:,} global ports could not be placed on a group pair"
    busiest = [{"a": pair.a, "b": pair.b, "percent": round(100 * pair.fraction, 1), "links": pair.links,
                "gb_per_s": round(pair.bytes_per_s / 1e9, 2), "jobs": sharing_jobs((pair.a, pair.b), job_groups)}
               for pair in ranked[:5]]
    per_group: dict[int, dict] = {}
    for pair in ranked:  # ranked busiest first: each group keeps its busiest pair
        for group, other in ((pair.a, pair.b), (pair.b, pair.a)):
            per_group.setdefault(group, {"busiest_pair_percent": round(100 * pair.fraction, 1), "with_group": other})
    return {"verdict": verdict, "note": note, "matrix": {"groups": groups, "z": z}, "busiest": busiest,
            "per_group": per_group}


def with_group_network(groups: list[dict], summary: dict) -> list[dict]:
    """The per-group load rows with ``network``: the load of the group's busiest global-link pair (None where its
    pairs were not measured)."""
    per_group = summary.get("per_group") or {}
    return [{**row, "network": per_group.get(row.get("group"))} for row in groups]


def filesystem_summary(rates: list[dict], jobs_read: int, jobs_running: int) -> dict:
    """Sum of the running jobs' latest Lustre rates (``rates``: one dict per job with read/write bytes/s)."""
    read = sum(rate.get("read_bytes_per_s") or 0.0 for rate in rates)
    write = sum(rate.get("write_bytes_per_s") or 0.0 for rate in rates)
    metadata = sum(rate.get("metadata_ops_per_s") or 0.0 for rate in rates)
    if not rates:
        return {"verdict": None, "note": f"no Lustre job statistics for the {jobs_running} running jobs in the last minutes"}
    busiest = max(rates, key=lambda rate: (rate.get("write_bytes_per_s") or 0) + (rate.get("read_bytes_per_s") or 0))
    verdict = (f"File system: the running jobs write {write / 1e9:.2f} GB/s and read {read / 1e9:.2f} GB/s"
               f" ({metadata:,.0f} metadata operations/s); most: {busiest['label']}")
    return {"verdict": verdict, "read_gb_per_s": round(read / 1e9, 3), "write_gb_per_s": round(write / 1e9, 3),
            "metadata_ops_per_s": round(metadata, 1),
            "note": f"{len(rates)} of {jobs_running} running jobs reported Lustre statistics ({jobs_read} read)"}


def matrix_figure(matrix: dict) -> dict:
    """The group × group heatmap (percent of the pair's link capacity on 0-100, unmeasured pairs blank) as
    Plotly JSON."""
    import plotly.graph_objects as go

    from apps.topology.figures import LOAD_SCALE

    labels = [str(group) for group in matrix["groups"]]
    figure = go.Figure(go.Heatmap(
        z=matrix["z"], x=labels, y=labels, zmin=0, zmax=100, colorscale=LOAD_SCALE, hoverongaps=False,
        colorbar={"title": {"text": "% of link<br>capacity"}},
        hovertemplate="group %{y} ↔ %{x}: %{z} % of its global links<extra></extra>"))
    figure.update_layout(height=520, margin={"l": 50, "r": 10, "t": 10, "b": 50}, plot_bgcolor="#ffffff",
                         xaxis={"title": "group", "type": "category"},
                         yaxis={"title": "group", "type": "category", "autorange": "reversed", "scaleanchor": "x"})
    return figure.to_plotly_json()
