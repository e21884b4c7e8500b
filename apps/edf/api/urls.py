"""REST endpoints of the EDF app, mounted under /api/v1/edf/."""
from django.urls import path

from .views import EdfValidateView

app_name = "edf-api"

urlpatterns = [path("validate/", EdfValidateView.as_view(), name="validate")]
