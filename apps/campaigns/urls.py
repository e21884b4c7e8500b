from django.urls import path

from . import views

app_name = "campaigns"

urlpatterns = [
    path("", views.CampaignListView.as_view(), name="index"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="detail"),
]
