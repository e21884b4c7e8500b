"""GET /api/v1/nodes/<host>/history/?since=&until=: a node's own history (issue 39), beside telemetry's
``/api/v1/nodes/<host>/versions/``. Staff, and people who may see a job that ran on the node; everyone else (job tokens
included) gets the 404 of a node that does not exist. Others' jobs are "another project's job", never named."""
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.telemetry.ingest import HOSTNAME

from ..node_history import MAX_DAYS, WindowError, window
from ..selectors import node_history, node_may_see


class NodeJobSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="the job's name and id where the viewer may see it, else \"another project's job\"")
    visible = serializers.BooleanField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(allow_null=True)
    state = serializers.CharField()


class NodeVettingSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    eval_name = serializers.CharField()
    outcome = serializers.CharField()


class NodeHealthChangeSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    from_state = serializers.CharField()
    to_state = serializers.CharField()
    action = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


class NodeHistoryResponse(serializers.Serializer):
    """Buckets of ``step`` seconds starting at ``times``; per GPU, NIC and host series, one value (or null) per bucket."""

    host = serializers.CharField()
    cluster = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    step = serializers.IntegerField()
    times = serializers.ListField(child=serializers.DateTimeField())
    state = serializers.CharField(help_text="the node's health state now (vetting)")
    gpus = serializers.DictField(child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
                                 help_text="{gpu: SM activity (DCGM 1002, 0-1) per bucket}")
    gpu_page_cache = serializers.DictField(child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
                                           help_text="{gpu: bytes of page cache in the GPU's memory per bucket}")
    nics = serializers.DictField(child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
                                 help_text="{nic: bytes/s sent per bucket}")
    host_metrics = serializers.DictField(child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
                                         help_text="{cpu_busy, mem_used: shares 0-1 per bucket}")
    jobs = NodeJobSerializer(many=True)
    vetting = NodeVettingSerializer(many=True)
    health = NodeHealthChangeSerializer(many=True)
    problems = serializers.ListField(child=serializers.CharField())


def checked_host(host: str) -> str:
    if not HOSTNAME.match(host) or len(host) > 64:
        raise InputError(f"{host[:80]!r} is not a host name", [ErrorItem(message="letters, digits, '.', '_', '-'", field="host")])
    return host


def checked_window(params):
    try:
        return window(params.get("since"), params.get("until"))
    except WindowError as exc:
        raise InputError(str(exc), [ErrorItem(message=str(exc), field=exc.field)]) from None


class NodeHistoryView(APIView):
    """A node's GPUs', NICs' and host's telemetry, the jobs that ran on it, its vetting results and health changes, on
    one time grid (at most 31 days; default the last 7)."""

    @extend_schema(parameters=[OpenApiParameter("since", str, required=False, description="ISO 8601; default until - 7 days"),
                               OpenApiParameter("until", str, required=False, description="ISO 8601; default now"
                                                f" (at most {MAX_DAYS} days after since)")],
                   responses={200: NodeHistoryResponse})
    def get(self, request, host):
        host = checked_host(host)
        if not node_may_see(request.user, host):
            raise InputError("no such node among those you may see (staff, or a job you may see ran on it)", status_code=404)
        since, until = checked_window(request.query_params)
        return Response(NodeHistoryResponse(node_history(request.user, host, since, until)).data)
