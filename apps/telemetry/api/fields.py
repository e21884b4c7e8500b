"""GET /api/v1/telemetry/fields/: the field registries, for clients that post samples and for pages.

``dcgm``: every DCGM field of ``apps/telemetry/fields.FIELDS`` (id, names, unit, kind, meaning);
``network``: every network field of ``apps/telemetry/netfields`` (unit, kind, meaning, the driver
names it maps from and where those are read); ``host``: every host field of ``apps/telemetry/hostfields``
(domains, unit, kind, meaning, source). A few lines: the registries are plain modules."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import fields as dcgm_fields
from .. import hostfields, netfields
from .openapi import TelemetryFieldsResponse
from .views import TELEMETRY_AUTHENTICATION


def dcgm_entry(field) -> dict:
    return {"id": field.id, "name": field.name, "legacy": getattr(field, "legacy", None),
            "dmon": getattr(field, "dmon", None), "unit": field.unit, "kind": field.kind,
            "group": getattr(field, "group", ""), "meaning": field.meaning}


class FieldsView(APIView):
    """The DCGM fields GPU samples may name, and the network fields NIC and switch-port samples may name
    (with the Cassini driver names each maps from)."""

    authentication_classes = TELEMETRY_AUTHENTICATION

    @extend_schema(responses={200: TelemetryFieldsResponse})
    def get(self, request):
        return Response({"dcgm": [dcgm_entry(field) for field in dcgm_fields.FIELDS.values()],
                         "network": [field.as_dict() for field in netfields.NET_FIELDS.values()],
                         "host": [field.as_dict() for field in hostfields.HOST_FIELDS.values()]})
