"""REST endpoints of the storage app, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from . import views

app_name = "storage-api"

urlpatterns = [
    path("jobs/<slug:cluster>/<int:job_id>/storage/", views.StorageView.as_view(), name="storage"),
]
