"""REST endpoints of the system app (thin: validate, call a selector, answer)."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from ..network import with_group_network
from ..selectors import system_network, system_overview
from .openapi import SystemOverviewResponse
from .serializers import OverviewParams

PUBLIC_KEYS = ("generated", "cluster", "totals", "coverage", "jobs", "groups", "switches", "network", "network_note",
               "histogram", "histogram_note")


class OverviewView(APIView):
    """The running jobs of the whole machine with their scores, where they sit, and the load they put on each
    dragonfly group and switch. Everyone signed in sees the aggregates; a job's id, name, user, account and
    link only where the caller may see the job."""

    @extend_schema(parameters=[OverviewParams], responses={200: SystemOverviewResponse})
    def get(self, request):
        params = OverviewParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        answer = system_overview(request.user, cluster=params.validated_data.get("cluster"))
        loads = system_network(request.user, cluster=params.validated_data.get("cluster"))
        summary = loads["network"]
        answer.update(groups=with_group_network(answer["groups"], summary), network_note=summary["note"],
                      network={**{key: summary[key] for key in ("verdict", "note", "matrix", "busiest")},
                               "filesystem": loads["filesystem"]})
        return Response({key: answer[key] for key in PUBLIC_KEYS})
