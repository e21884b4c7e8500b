"""Application-metrics endpoints, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from . import compare, report, views

app_name = "appmetrics-api"

urlpatterns = [
    path("jobs/compare/", compare.CompareView.as_view(), name="compare"),
    path("jobs/<slug:cluster>/<int:job_id>/metrics/", views.MetricsView.as_view(), name="metrics"),
    path("jobs/<slug:cluster>/<int:job_id>/model/", views.ModelView.as_view(), name="model"),
    path("jobs/<slug:cluster>/<int:job_id>/efficiency/", views.EfficiencyView.as_view(), name="efficiency"),
    path("jobs/<slug:cluster>/<int:job_id>/report/", report.ReportView.as_view(), name="report"),
    path("jobs/<slug:cluster>/<int:job_id>/report.pdf", report.ReportFileView.as_view(), name="report-pdf"),
]
