from django.urls import path

from . import views

app_name = "edf"

urlpatterns = [
    path("", views.EdfIndexView.as_view(), name="index"),
    path("schema.json", views.edf_schema_view, name="schema"),
    path("new/", views.EdfEditorView.as_view(), name="new"),
    path("<str:owner>/<str:name>/", views.EdfEditorView.as_view(), name="detail"),
    path("<str:owner>/<str:name>/history/", views.EdfHistoryView.as_view(), name="history"),
    path("<str:owner>/<str:name>/download/", views.EdfDownloadView.as_view(), name="download"),
    path("<str:owner>/<str:name>/delete/", views.EdfDeleteView.as_view(), name="delete"),
    path("<str:owner>/<str:name>/restore/<int:number>/", views.EdfRestoreView.as_view(), name="restore"),
]
