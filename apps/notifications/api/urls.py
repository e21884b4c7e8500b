"""REST endpoints of the notifications app, mounted under /api/v1/notifications/."""
from django.urls import path  # noqa: F401

app_name = "notifications-api"

urlpatterns = []
