"""REST endpoints of the jobs app, mounted under /api/v1/jobs/."""
from django.urls import path

from .views import JobDetailView, JobEventView, JobFirstScreenView, JobListView, JobTokenView

app_name = "jobs-api"

urlpatterns = [
    path("", JobListView.as_view(), name="job-list"),
    path("events/", JobEventView.as_view(), name="events"),
    path("<slug:cluster>/<int:job_id>/", JobDetailView.as_view(), name="job-detail"),
    path("<slug:cluster>/<int:job_id>/token/", JobTokenView.as_view(), name="job-token"),
    path("<slug:cluster>/<int:job_id>/first-screen/", JobFirstScreenView.as_view(), name="job-first-screen"),
]
