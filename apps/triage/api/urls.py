"""REST endpoints of the triage app, mounted under /api/v1/staff/triage/."""
from django.urls import path

from . import views

app_name = "triage-api"

urlpatterns = [
    path("", views.TriageListView.as_view(), name="items"),
    path("<int:pk>/", views.TriageItemView.as_view(), name="item"),
]
