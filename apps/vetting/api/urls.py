"""REST endpoints of the vetting app, mounted under /api/v1/vetting/."""
from django.urls import path

from . import views

app_name = "vetting-api"

urlpatterns = [
    path("runs/", views.RunListView.as_view(), name="runs"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="run"),
    path("import/", views.ImportView.as_view(), name="import"),
    path("results/", views.ResultListView.as_view(), name="results"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/<str:host>/", views.NodeDetailView.as_view(), name="node"),
    path("nodes/<str:host>/actions/", views.NodeActionView.as_view(), name="node-action"),
    path("rules/", views.RuleListView.as_view(), name="rules"),
    path("rules/<slug:slug>/", views.RuleDetailView.as_view(), name="rule"),
    path("recommendations/", views.RecommendationListView.as_view(), name="recommendations"),
    path("recommendations/<int:pk>/resolve/", views.RecommendationResolveView.as_view(), name="recommendation-resolve"),
    path("protocols/validate/", views.ProtocolValidateView.as_view(), name="protocol-validate"),
]
