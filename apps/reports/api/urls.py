"""REST endpoints of the reports app, mounted under /api/v1/reports/."""
from django.urls import path  # noqa: F401

app_name = "reports-api"

urlpatterns = []
