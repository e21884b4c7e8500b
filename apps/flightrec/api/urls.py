"""REST endpoints of the flightrec app, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from . import views

app_name = "flightrec-api"

urlpatterns = [
    path("jobs/<slug:cluster>/<int:job_id>/flight-recorder/", views.FlightRecorderView.as_view(), name="flight-recorder"),
]
