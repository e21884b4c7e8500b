"""The node pages (issue 39), at /nodes/<host>/."""
from django.urls import path

from . import views

app_name = "nodes"

urlpatterns = [
    path("", views.node_lookup, name="lookup"),
    path("<str:host>/", views.NodeHistoryPageView.as_view(), name="detail"),
]
