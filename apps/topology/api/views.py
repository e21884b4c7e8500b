from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError

from ..formats import DiscoveredNic, DiscoveryRecord, TopologyFormatError, nodes_from_discovery
from ..model import Topology
from ..placement import UnknownNodesError
from ..selectors import node_list, topology_current, topology_index_current, topology_revision_latest
from ..services import topology_apply
from .openapi import DiscoveryResponse, PlacementResponse
from .serializers import (
    DiscoveryBatchSerializer,
    DiscoveryRecordSerializer,
    NodeSerializer,
    PlacementRequestSerializer,
    SummarySerializer,
)


class SummaryView(APIView):
    """How big the stored system is."""

    @extend_schema(responses=SummarySerializer)
    def get(self, request):
        topology = topology_current()
        revision = topology_revision_latest()
        return Response({**topology.counts(), "name": topology.name, "revision": revision.pk if revision else None})


@extend_schema(parameters=[
    OpenApiParameter("group", int, description="Only nodes of this dragonfly group."),
    OpenApiParameter("switch", str, description="Only nodes with a NIC on this switch: its index with `group`, or `group.index`."),
])
class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Nodes with their NICs (and each NIC's group, switch and port) and GPUs."""

    serializer_class = NodeSerializer
    lookup_field = "hostname"
    lookup_value_regex = r"[^/]+"

    def get_queryset(self):
        params = self.request.query_params
        problems = []
        group = switch = None
        if params.get("group"):
            if not params["group"].isdigit():
                problems.append(ErrorItem(f"expected a group number, got {params['group']!r}", field="group"))
            else:
                group = int(params["group"])
        if params.get("switch"):
            text = params["switch"]
            parts = text.split(".")
            if len(parts) == 2 and all(part.isdigit() for part in parts):
                switch = (int(parts[0]), int(parts[1]))
            elif text.isdigit() and group is not None:
                switch = (group, int(text))
            else:
                problems.append(ErrorItem(f"expected a switch as 'group.index', or an index together with group=, got {text!r}", field="switch"))
        if problems:
            raise InputError("Invalid filter.", problems)
        return node_list(group=group, switch=switch)

    def get_object(self):
        return get_object_or_404(node_list(), hostname=self.kwargs["hostname"])


class PlacementView(APIView):
    """Placement metrics of a node set: span, fragmentation, per-group histogram, hop classes."""

    @extend_schema(request=PlacementRequestSerializer, responses={200: PlacementResponse})
    def post(self, request):
        serializer = PlacementRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            placement = topology_index_current().placement(serializer.validated_data["nodes"])
        except UnknownNodesError as exc:
            raise InputError(
                str(exc), [ErrorItem(f"unknown node {hostname!r}", field="nodes") for hostname in exc.hostnames[:100]]
            ) from None
        return Response(placement.as_dict())


class CanSubmitDiscovery(permissions.BasePermission):
    """Staff, or a service account holding topology.add_node (the prolog's token)."""

    message = "Submitting discovery records needs staff rights or the topology.add_node permission."

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and (user.is_staff or user.has_perm("topology.add_node")))


class DiscoveryView(APIView):
    """Per-node discovery records from the Slurm prolog: hostname, xname and each NIC's MAC.

    Accepts one record, or ``{"records": [...]}``. Records are decoded (MAC → group, switch,
    port) and upserted; all or nothing.
    """

    permission_classes = [CanSubmitDiscovery]

    @extend_schema(request=DiscoveryRecordSerializer, responses={200: DiscoveryResponse})
    def post(self, request):
        batch = isinstance(request.data, dict) and "records" in request.data
        serializer = (DiscoveryBatchSerializer if batch else DiscoveryRecordSerializer)(data=request.data)
        serializer.is_valid(raise_exception=True)
        raw_records = serializer.validated_data["records"] if batch else [serializer.validated_data]
        records = [
            DiscoveryRecord(
                hostname=raw["hostname"],
                nics=tuple(DiscoveredNic(nic["name"], nic["mac"]) for nic in raw["nics"]),
                xname=raw.get("xname") or None,
                gpus=raw.get("gpus"),
                gpu_model=raw.get("gpu_model", ""),
            )
            for raw in raw_records
        ]
        try:
            nodes = nodes_from_discovery(records, "records" if batch else "")
        except TopologyFormatError as exc:
            raise InputError(
                f"{len(exc.problems)} problem(s) in the discovery record(s); nothing was stored.",
                [ErrorItem(problem.message, field=problem.field) for problem in exc.problems],
            ) from None
        report, revision = topology_apply(
            Topology("discovery", nodes, [], []), source=f"discovery by {request.user.get_username()}", prune=False
        )
        return Response({"nodes": len(nodes), "changed": report.changed, "summary": report.lines(),
                         "revision": revision.pk if revision else None})
