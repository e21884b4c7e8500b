"""REST endpoints of the network app, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from . import views

app_name = "network-api"

urlpatterns = [
    path("jobs/<slug:cluster>/<int:job_id>/network/", views.NetworkView.as_view(), name="network"),
    path("jobs/<slug:cluster>/<int:job_id>/network/heatmap/", views.NetworkHeatmapView.as_view(), name="heatmap"),
]
