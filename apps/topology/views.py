"""Topology pages: the whole system, one group, one node."""
import json

import hostlist
from django.http import Http404
from django.views.generic import TemplateView

from .figures import system_figure
from .placement import UnknownNodesError
from .selectors import node_get, node_states, topology_current, topology_index_current, topology_revision_latest

MAX_OVERLAY_NODES = 20000


def parse_node_set(text: str) -> tuple[list[str], str | None]:
    """Hostnames from a hostlist expression or a comma/space separated list; (names, problem)."""
    text = (text or "").strip()
    if not text:
        return [], None
    try:
        # hostlist handles commas itself (also inside brackets); whitespace separates like a comma.
        names = hostlist.expand_hostlist(",".join(text.split()))
    except hostlist.BadHostlist as exc:
        return [], f"{text[:80]!r} is not a hostlist expression ({exc}); use e.g. nid[000001-000128]"
    if len(names) > MAX_OVERLAY_NODES:
        return [], f"at most {MAX_OVERLAY_NODES} nodes can be highlighted, got {len(names)}"
    return names, None


class TopologyIndexView(TemplateView):
    template_name = "topology/index.html"
    colour_modes = {"state": "node state", "job": "running job", "vetting": "vetting", "group": "group", "overlay": "highlighted nodes"}

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        topology = topology_current()
        context["counts"] = topology.counts()
        context["topology"] = topology
        if not topology.nodes:
            return context
        names, problem = parse_node_set(self.request.GET.get("nodes", ""))
        placement = None
        if names and not problem:
            try:
                placement = topology_index_current().placement(names)
            except UnknownNodesError as exc:
                problem = str(exc)
        # "automatic" (empty): highlight the given nodes if there are any, else show node states.
        colour_choice = self.request.GET.get("color", "")
        colour_by = colour_choice or ("overlay" if placement else "state")
        if colour_by not in self.colour_modes or (colour_by == "overlay" and not placement):
            colour_by = "state"
        extra = {}
        if colour_by == "job":
            # Jobs depend on topology, not the other way round: ask the jobs app only here.
            from apps.jobs.selectors import OTHER_JOBS, OTHER_USERS_JOBS, running_job_labels_for_user

            extra = {"colour_by": "label", "labels": running_job_labels_for_user(self.request.user),
                     "unlabelled": "no running job", "muted_labels": (OTHER_JOBS, OTHER_USERS_JOBS)}
        elif colour_by == "vetting":
            from apps.vetting.selectors import vetting_labels

            labels, colours = vetting_labels()
            extra = {"colour_by": "label", "labels": labels, "unlabelled": "not vetted in 7 days", "label_colours": colours}
        figure = system_figure(topology, states=node_states(), highlight=set(names) if placement else None,
                               **({"colour_by": colour_by} | extra))
        context.update(
            figure_data=json.loads(figure.to_json()),
            placement=placement,
            overlay_text=self.request.GET.get("nodes", ""),
            overlay_problem=problem,
            colour_by=colour_by,
            colour_choice=colour_choice if colour_choice in self.colour_modes else "",
            colour_modes=self.colour_modes,
            revision=topology_revision_latest(),
            assumptions=(topology.parameters or {}).get("assumptions") or {},
        )
        return context


class GroupDetailView(TemplateView):
    template_name = "topology/group.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        topology = topology_current()
        number = kwargs["number"]
        if number not in topology.groups:
            raise Http404("no such group")
        members = [node for node in topology.nodes if node.group == number]
        switches = []
        for switch in (s for s in topology.switches if s.group == number):
            attached = [(node.hostname, nic.name, nic.port) for node in members for nic in node.nics if nic.switch == switch.index]
            switches.append({"switch": switch, "nics": attached})
        figure = system_figure(topology, states=node_states(), groups=[number])
        context.update(number=number, nodes=members, switches=switches, figure_data=json.loads(figure.to_json()),
                       cabinet=next((node.cabinet for node in members if node.cabinet), ""))
        return context


class NodeDetailView(TemplateView):
    template_name = "topology/node.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        node = node_get(kwargs["hostname"])
        if node is None:
            raise Http404("no such node")
        nics = list(node.nics.all())
        context.update(node=node, nics=nics, gpus=[{"index": i, "nic": next((n.name for n in nics if n.index == i), None)} for i in range(node.gpus)])
        return context
