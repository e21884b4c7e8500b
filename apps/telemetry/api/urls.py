"""REST endpoints of the telemetry app, mounted at the top of /api/v1/: the store's own under telemetry/, a
job's products next to the job (jobs/<cluster>/<job_id>/telemetry/), as the saturation API is."""
from django.urls import path

from . import fields, heatmap, versions, views

app_name = "telemetry-api"

urlpatterns = [
    path("telemetry/samples/", views.SampleIngestView.as_view(), name="samples"),
    path("telemetry/series/", views.SeriesView.as_view(), name="series"),
    path("telemetry/import/", views.ImportView.as_view(), name="import"),
    path("telemetry/fields/", fields.FieldsView.as_view(), name="fields"),
    path("nodes/<str:host>/versions/", versions.NodeVersionsView.as_view(), name="node-versions"),
    path("jobs/<slug:cluster>/<int:job_id>/telemetry/heatmap/", heatmap.TelemetryHeatmapView.as_view(), name="job-heatmap"),
    path("jobs/<slug:cluster>/<int:job_id>/telemetry/nodes/", heatmap.TelemetryNodesView.as_view(), name="job-nodes"),
]
