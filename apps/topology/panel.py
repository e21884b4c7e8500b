"""The allocation panel of the job page: where the job's nodes sit on the dragonfly.

The shell carries the placement numbers (a cheap index lookup); the figure of the groups the job
uses loads after the first paint from ``figures["allocation"]``.
"""
import json

from django.urls import reverse

from apps.core.panels import Fact, PanelSummary

from .figures import system_figure
from .placement import UnknownNodesError
from .selectors import node_states, topology_current, topology_index_current


def placement_of(job):
    """(placement, problem words) of the job's nodes on the current topology."""
    if not job.node_list:
        return None, None
    try:
        return topology_index_current().placement(job.node_list), None
    except UnknownNodesError as exc:
        return None, f"{exc}: the topology does not know all nodes of this job yet."


def context(job, request) -> dict:
    placement, problem = placement_of(job)
    return {"placement": placement, "placement_problem": problem,
            "topology_url": (reverse("topology:index") + "?" + _query(job)) if job.nodes else None,
            "allocation_figure_url": reverse("jobs:panel-figure", args=[job.cluster.name, job.job_id, "allocation", "map"])}


def _query(job) -> str:
    from urllib.parse import urlencode

    return urlencode({"nodes": job.nodes, "job": f"{job.cluster.name}/{job.job_id}"})


def summary(job) -> PanelSummary | None:
    placement, _ = placement_of(job)
    if placement is None:
        return None
    groups = int(placement.groups)
    return PanelSummary(facts=[Fact("Placement", f"{groups:,} dragonfly group{'s' * (groups != 1)}",
                                    f"{int(placement.switches):,} switches, fragmentation {placement.group_fragmentation:.2g}",
                                    "info", "fact-placement")])


def allocation_figure(job, query) -> dict:
    placement, _ = placement_of(job)
    if placement is None:
        return {}
    figure = system_figure(topology_current(), states=node_states(), highlight=set(job.node_list),
                           highlight_label="this job's nodes", colour_by="overlay",
                           groups=[int(group) for group in placement.nodes_per_group])
    return json.loads(figure.to_json())


def version(job) -> str | None:
    return None  # node states change independently of the job: recomputed on request


FIGURES = {"map": allocation_figure}
