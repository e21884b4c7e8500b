"""REST endpoints of the topology app, mounted under /api/v1/topology/."""
from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import DiscoveryView, NodeViewSet, PlacementView, SummaryView

app_name = "topology-api"

router = SimpleRouter()
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("summary/", SummaryView.as_view(), name="summary"),
    path("placement/", PlacementView.as_view(), name="placement"),
    path("discovery/", DiscoveryView.as_view(), name="discovery"),
    *router.urls,
]
