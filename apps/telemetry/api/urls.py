"""REST endpoints of the telemetry app, mounted under /api/v1/telemetry/."""
from django.urls import path

from . import views

app_name = "telemetry-api"

urlpatterns = [
    path("samples/", views.SampleIngestView.as_view(), name="samples"),
    path("series/", views.SeriesView.as_view(), name="series"),
    path("import/", views.ImportView.as_view(), name="import"),
]
