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
