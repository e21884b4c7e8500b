"""REST endpoints of the reports app, mounted under /api/v1/reports/."""
from django.urls import path

from . import views

app_name = "reports-api"

urlpatterns = [
    path("usage/", views.UsageView.as_view(), name="usage"),
    path("usage.<slug:extension>", views.UsageDownloadView.as_view(), name="usage-download"),
]
