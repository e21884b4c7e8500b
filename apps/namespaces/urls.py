from django.urls import path

from . import views

app_name = "namespaces"

urlpatterns = [
    path("", views.NamespaceIndexView.as_view(), name="index"),
    path("new/", views.RequestFormView.as_view(), name="new"),
    path("new/preview/", views.PreviewView.as_view(), name="preview"),
    path("approvals/", views.ApprovalQueueView.as_view(), name="approvals"),
    path("requests/<int:pk>/", views.RequestDetailView.as_view(), name="request"),
    path("requests/<int:pk>/live/", views.RequestLiveView.as_view(), name="request-live"),
    path("<slug:name>/", views.NamespaceDetailView.as_view(), name="detail"),
]
