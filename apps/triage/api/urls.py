"""REST endpoints of the triage app, mounted under /api/v1/staff/triage/."""
from django.urls import path  # noqa: F401

app_name = "triage-api"

urlpatterns = []
