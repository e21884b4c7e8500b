"""The system page: the verdict on the whole machine first (server-rendered), the figures as JSON after
first paint (``system:data``). Anonymous requests never get here: LoginRequiredMiddleware sends them to log in."""
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.serializers.json import DjangoJSONEncoder
from django.http import JsonResponse
from django.views.generic import TemplateView

import json

from plotly.utils import PlotlyJSONEncoder

from .network import matrix_figure, with_group_network
from .selectors import system_histogram, system_map, system_network, system_overview

DATA_KEYS = ("generated", "totals", "coverage", "jobs", "groups", "switches", "map")


class SystemView(LoginRequiredMixin, TemplateView):
    template_name = "system/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        answer = system_overview(self.request.user, histogram=False)  # the histogram comes with the figures' JSON
        context.update({key: answer[key] for key in ("generated", "totals", "coverage", "worst_jobs", "histogram_note")})
        loads = system_network(self.request.user)
        context.update(network=loads["network"], filesystem=loads["filesystem"], network_note=loads["network"]["note"],
                       groups=with_group_network(answer["groups"], loads["network"]))
        if loads["network"]["matrix"]:
            context["network_figure"] = json.loads(json.dumps(matrix_figure(loads["network"]["matrix"]),
                                                              cls=PlotlyJSONEncoder))
        return context


def system_data(request):
    """The page's first figures: the node map (compact arrays), running jobs as the viewer may see them, load."""
    answer = system_map(request.user)
    return JsonResponse({key: answer[key] for key in DATA_KEYS}, encoder=DjangoJSONEncoder)


def histogram_data(request):
    """The saturation histogram 24 h / 7 d, fetched after the map has drawn (it reads a week of jobs)."""
    return JsonResponse(system_histogram(request.user), encoder=DjangoJSONEncoder)


class VersionsView(LoginRequiredMixin, TemplateView):
    """The fleet's version map: per partition and per dragonfly group, each key's values with their node counts
    (a mixed cell stands out), a partition's expected set and minority nodes, and the drift over time."""

    template_name = "system/versions.html"

    def get_context_data(self, **kwargs):
        from apps.telemetry import versions as vocabulary

        from .version_map import fleet_versions

        context = super().get_context_data(**kwargs)
        partition = self.request.GET.get("partition", "")
        partition = partition if partition and len(partition) <= 64 and partition.replace("-", "").replace("_", "").replace(".", "").isalnum() else ""
        found = fleet_versions(partition or None)
        shown = [key for key in vocabulary.COMPARED if any(key in cell for cell in found["by_partition"].values())]
        def table(places):
            return [{"place": place or "unknown", "cells": [{"key": key, "values": cells.get(key, []),
                                                               "mixed": len(cells.get(key, [])) > 1} for key in shown]}
                    for place, cells in places.items()]
        context.update(versions=found, keys=[(key, vocabulary.KEYS[key].label) for key in shown], partition=partition,
                       by_partition=table(found["by_partition"]),
                       by_group=sorted(table(found["by_group"]), key=lambda row: (not row["place"].isdigit(), int(row["place"]) if row["place"].isdigit() else 0)),
                       mixed_groups=sum(1 for row in table(found["by_group"]) if any(c["mixed"] for c in row["cells"])))
        return context


class NodeHistoryPageView(LoginRequiredMixin, TemplateView):
    """A node's own history (issue 39): its GPUs', NICs' and host's telemetry over days, the jobs that ran on it, its
    vetting results and health changes on one time axis. Staff and people who may see a job that ran there; others get
    the 404 of a node that does not exist. ``?days=`` (1-31, default 7) or ``?since=&until=``."""

    template_name = "system/node.html"

    def get_context_data(self, **kwargs):
        from datetime import timedelta

        from django.http import Http404
        from django.utils import timezone

        from apps.telemetry.ingest import HOSTNAME

        from .node_history import MAX_DAYS, WindowError, figure, window
        from .selectors import node_history, node_may_see

        context = super().get_context_data(**kwargs)
        host = kwargs["host"]
        if not HOSTNAME.match(host) or len(host) > 64 or not node_may_see(self.request.user, host):
            raise Http404("no such node")
        params = self.request.GET
        days = params.get("days", "")
        problem = None
        try:
            if days and not (params.get("since") or params.get("until")):
                if not days.isdigit() or not 1 <= int(days) <= MAX_DAYS:
                    raise WindowError("days", f"days must be a whole number from 1 to {MAX_DAYS}")
                until = timezone.now()
                since, until = until - timedelta(days=int(days)), until
            else:
                since, until = window(params.get("since"), params.get("until"))
        except WindowError as exc:
            problem = str(exc)
            since, until = window()
        history = node_history(self.request.user, host, since, until)
        context.update(host=host, history=history, problem=problem, days=days or "7",
                       figure=json.loads(json.dumps(figure(history), cls=PlotlyJSONEncoder)),
                       visible_jobs=[job for job in history["jobs"] if job["visible"]],
                       hidden_jobs=sum(1 for job in history["jobs"] if not job["visible"]),
                       day_choices=sorted({1, 3, 7, 14, 31} | ({int(days)} if days.isdigit() and 1 <= int(days) <= MAX_DAYS
                                                                else set())))
        return context


def node_lookup(request):
    """/nodes/?host=nid001234 (the system page's form) -> /nodes/nid001234/; a bad or missing name back to /system/."""
    from django.shortcuts import redirect

    from apps.telemetry.ingest import HOSTNAME

    host = request.GET.get("host", "").strip()
    if not host or len(host) > 64 or not HOSTNAME.match(host):
        return redirect("system:index")
    return redirect("nodes:detail", host=host)
