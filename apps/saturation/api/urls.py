"""Saturation endpoints, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from . import series, views

app_name = "saturation-api"

urlpatterns = [
    path("jobs/<slug:cluster>/<int:job_id>/saturation/", views.SaturationView.as_view(), name="saturation"),
    path("jobs/<slug:cluster>/<int:job_id>/saturation/heatmap/", views.HeatmapView.as_view(), name="heatmap"),
    path("jobs/<slug:cluster>/<int:job_id>/saturation/series/", series.SeriesView.as_view(), name="series"),
    path("jobs/<slug:cluster>/<int:job_id>/saturation/<slug:table>.<slug:extension>", views.DownloadView.as_view(),
         name="download"),
    path("jobs/<slug:cluster>/<int:job_id>/stragglers/", views.StragglersView.as_view(), name="stragglers"),
]
