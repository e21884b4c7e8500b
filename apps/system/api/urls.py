"""REST endpoints of the system app, mounted under /api/v1/system/."""
from django.urls import path  # noqa: F401

app_name = "system-api"

urlpatterns = []
