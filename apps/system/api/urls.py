"""REST endpoints of the system app, mounted under /api/v1/system/."""
from django.urls import path

from . import versions, views

app_name = "system-api"

urlpatterns = [
    path("overview/", views.OverviewView.as_view(), name="overview"),
    path("versions/", versions.SystemVersionsView.as_view(), name="versions"),
]
