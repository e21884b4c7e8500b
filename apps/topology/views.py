"""Topology pages: the whole system, one group, one node."""
import json
import re

from django.http import Http404
from django.urls import reverse
from django.views.generic import TemplateView
from rest_framework import serializers

from apps.core import hostlists
from apps.core.api.params import JobRefField
from apps.core.link_colourings import link_colouring, link_colourings
from apps.core.node_colourings import node_colouring, node_colourings

from .figures import system_figure
from .links import FOCUS_LABELS
from .placement import UnknownNodesError
from .selectors import node_get, node_states, topology_current, topology_index_current, topology_revision_latest

MAX_OVERLAY_NODES = 20000
MAX_FOCUS_NODES = 64


def parse_node_set(text: str) -> tuple[list[str], str | None]:
    """Hostnames from a hostlist expression or a comma/space separated list; (names, problem)."""
    text = (text or "").strip()
    if not text:
        return [], None
    try:
        # Slurm's grammar: commas, spaces, tabs and newlines separate; a node set keeps each name once.
        names = list(dict.fromkeys(hostlists.expand(text)))
    except hostlists.HostlistError as exc:
        return [], f"{text[:80]!r} is not a hostlist expression ({exc}); use e.g. nid[000001-000128]"
    if len(names) > MAX_OVERLAY_NODES:
        return [], f"at most {MAX_OVERLAY_NODES} nodes can be highlighted, got {len(names)}"
    return names, None


class HostSetField(serializers.CharField):
    """A Slurm hostlist expression or a comma/space separated list of hostnames, as a list of names."""

    def __init__(self, *, most: int, **kwargs):
        self.most = most
        super().__init__(required=False, allow_blank=True, max_length=200_000, **kwargs)

    def to_internal_value(self, data):
        names, problem = parse_node_set(super().to_internal_value(data))
        if problem:
            raise serializers.ValidationError(problem)
        if len(names) > self.most:
            raise serializers.ValidationError(f"at most {self.most:,} nodes, got {len(names):,}")
        return names


class IndexParams(serializers.Serializer):
    """``/topology/?nodes=&focus=&job=&label=``: the nodes to highlight (a job's), the ones to single out among
    them (a straggler), the job to link back to (``cluster/job_id``), and what to call the focused nodes."""

    nodes = HostSetField(most=MAX_OVERLAY_NODES)
    focus = HostSetField(most=MAX_FOCUS_NODES)
    job = JobRefField(required=False)
    label = serializers.ChoiceField(choices=FOCUS_LABELS, required=False, error_messages={
        "invalid_choice": f"say {', '.join(FOCUS_LABELS)}; not {{input!r}}"})

    def validate_job(self, value):
        if not re.fullmatch(r"[-a-zA-Z0-9_]{1,100}", value.cluster):
            raise serializers.ValidationError(f"{value.cluster[:40]!r} is not a cluster name (letters, digits, - and _)")
        return value


def read_index_params(query) -> tuple[dict, list[str]]:
    """The valid parameters of the topology page, and a message per bad one naming it ("focus: ..."): a bad
    parameter is explained and left out; the others still apply."""
    data = {key: query.get(key) for key in IndexParams().fields if query.get(key) is not None}
    checked = IndexParams(data=data)
    if checked.is_valid():
        return dict(checked.validated_data), []
    problems = [f"{name}: {message}" for name, messages in checked.errors.items() for message in messages]
    rest = IndexParams(data={key: value for key, value in data.items() if key not in checked.errors})
    return (dict(rest.validated_data) if rest.is_valid() else {}), problems


# The colourings the topology knows itself; other apps register theirs (apps.core.node_colourings).
OWN_COLOURS = {"state": "node state", "group": "group", "overlay": "highlighted nodes"}


class TopologyIndexView(TemplateView):
    template_name = "topology/index.html"

    @property
    def colour_modes(self) -> dict[str, str]:
        """?color= value -> words: node state, the registered colourings in their order, group, highlighted nodes."""
        registered = {colouring.key: colouring.title for colouring in node_colourings() if colouring.key not in OWN_COLOURS}
        links = {colouring.key: colouring.title for colouring in link_colourings()
                 if colouring.key not in OWN_COLOURS and colouring.key not in registered}
        return {"state": OWN_COLOURS["state"], **registered, **links, "group": OWN_COLOURS["group"],
                "overlay": OWN_COLOURS["overlay"]}

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        topology = topology_current()
        context["counts"] = topology.counts()
        context["topology"] = topology
        if not topology.nodes:
            return context
        params, problems = read_index_params(self.request.GET)
        index = topology_index_current()
        names, focus = params.get("nodes") or [], params.get("focus") or []
        unknown = [host for host in focus if host not in index.row_of]
        if unknown:
            problems.append(f"focus: {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''} "
                            f"{'is not a node' if len(unknown) == 1 else 'are not nodes'} of this system")
            focus = [host for host in focus if host in index.row_of]
        placement = None
        if names:
            try:
                placement = index.placement(names)
            except UnknownNodesError as exc:
                problems.append(f"nodes: {exc}")
                names = []
        only_focus = bool(focus) and not names
        if only_focus:  # only focused nodes: they are the highlighted ones too
            names = list(focus)
            placement = index.placement(names)
        problem = "; ".join(problems) or None
        job = params.get("job")
        focus_label = params.get("label") or "focused"
        highlight_label = "this job's nodes" if job and placement and not only_focus else "selected nodes"
        context.update(focus_line=_focus_line(focus, [] if only_focus else names, focus_label, job, index) if focus else None,
                       job_ref=job,
                       job_url=reverse("jobs:detail", args=[job.cluster, job.job_id]) if job else None,
                       highlight_label=highlight_label, focus_label=focus_label, focus_text=",".join(focus))
        # "automatic" (empty): highlight the given nodes if there are any, else show node states.
        colour_choice = self.request.GET.get("color", "")
        colour_by = colour_choice or ("overlay" if placement else "state")
        if colour_by not in self.colour_modes or (colour_by == "overlay" and not placement):
            colour_by = "state"
        extra = {}
        registered = None if colour_by in OWN_COLOURS else node_colouring(colour_by)
        if registered is not None:
            labelled = registered.labels(self.request.user)
            extra = {"colour_by": "label", "labels": labelled.labels, "unlabelled": labelled.unlabelled,
                     "muted_labels": labelled.muted, "label_colours": labelled.colours}
        links = None if colour_by in OWN_COLOURS or registered is not None else link_colouring(colour_by)
        link_loads = links.loads(self.request.user) if links is not None else None
        if links is not None:  # switches and links carry the colour; nodes fade (highlighted ones still stand out)
            extra = {"colour_by": "overlay", "link_loads": link_loads}
            context.update(link_title=links.title, link_verdict=link_loads.verdict if link_loads else
                           f"No {links.title} to show: no switch port counters were imported for the last minutes.",
                           link_coverage=link_loads.coverage if link_loads else "")
        figure = system_figure(topology, states=node_states(), highlight=set(names) if placement else None,
                               highlight_label=highlight_label, focus=set(focus), focus_label=focus_label,
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


def _focus_line(focus: list[str], names: list[str], label: str, job, index) -> dict:
    """What the page says above the figure about the focused nodes: which, where, and whether they are among the
    highlighted ones."""
    among = set(names)
    places = []
    for host in focus[:8]:
        nic = index.nic_of(host, 0)
        places.append({"host": host, "where": f"group {nic.group}, switch {nic.group}.{nic.switch}" if nic else "",
                       "outside": host not in among})
    nodes = f"{len(names):,} node{'s' * (len(names) != 1)}"
    return {"label": label, "hosts": places, "more": max(0, len(focus) - len(places)), "count": len(focus),
            "among": (f"among the {nodes} of job {job}" if job else f"among the {nodes} highlighted") if names else ""}


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
