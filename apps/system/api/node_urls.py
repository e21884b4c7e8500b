"""A node's endpoints of the system app, at /api/v1/nodes/<host>/... beside telemetry's versions."""
from django.urls import path

from . import nodes

app_name = "system-nodes-api"

urlpatterns = [
    path("nodes/<str:host>/history/", nodes.NodeHistoryView.as_view(), name="node-history"),
]
