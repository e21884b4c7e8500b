"""REST endpoints of the campaigns app, mounted under /api/v1/campaigns/."""
from django.urls import path

from . import views

app_name = "campaigns-api"

urlpatterns = [
    path("", views.CampaignListView.as_view(), name="list"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="detail"),
    path("<int:pk>/jobs.csv", views.CampaignCsvView.as_view(), name="csv"),
]
