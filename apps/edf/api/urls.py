"""REST endpoints of the EDF app, mounted under /api/v1/edf/."""
from django.urls import path

from . import views

app_name = "edf-api"

_document = "documents/<str:owner>/<str:name>/"

urlpatterns = [
    path("validate/", views.EdfValidateView.as_view(), name="validate"),
    path("documents/", views.EdfListView.as_view(), name="document-list"),
    path(_document, views.EdfDetailView.as_view(), name="document-detail"),
    path(_document + "versions/", views.EdfVersionListView.as_view(), name="document-versions"),
    path(_document + "sharing/", views.EdfShareView.as_view(), name="document-sharing"),
    path(_document + "diff/", views.EdfDiffView.as_view(), name="document-diff"),
    path(_document + "download/", views.EdfDownloadView.as_view(), name="document-download"),
]
