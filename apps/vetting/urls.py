from django.urls import path

from . import views

app_name = "vetting"

urlpatterns = [
    path("", views.VettingIndexView.as_view(), name="index"),
    path("nodes/<str:host>/", views.NodeTimelineView.as_view(), name="node"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="run"),
    path("triage/", views.TriageView.as_view(), name="triage"),
    path("rules/", views.RulesView.as_view(), name="rules"),
    path("rules/<slug:slug>/edit/", views.RuleEditView.as_view(), name="rule-edit"),
    path("protocol/", views.ProtocolCheckView.as_view(), name="protocol"),
]
