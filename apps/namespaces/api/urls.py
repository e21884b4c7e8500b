"""REST endpoints of the namespaces app, mounted under /api/v1/namespaces/."""
from django.urls import path

from . import views

app_name = "namespaces-api"

urlpatterns = [
    path("", views.NamespaceListView.as_view(), name="namespaces"),
    path("inventory/", views.InventoryView.as_view(), name="inventory"),
    path("requests/", views.RequestListView.as_view(), name="requests"),
    path("requests/<int:pk>/", views.RequestDetailView.as_view(), name="request"),
    path("requests/<int:pk>/approve/", views.DecisionView.as_view(approve=True), name="approve"),
    path("requests/<int:pk>/reject/", views.DecisionView.as_view(approve=False), name="reject"),
    path("<slug:name>/", views.NamespaceDetailView.as_view(), name="namespace"),
    path("<slug:name>/teardown/", views.TeardownView.as_view(), name="teardown"),
    path("<slug:name>/teardown/backup-done/", views.BackupDoneView.as_view(), name="backup-done"),
]
