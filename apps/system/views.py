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
