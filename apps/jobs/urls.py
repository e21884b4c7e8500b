from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.JobListView.as_view(), name="index"),
    path("<slug:cluster>/<int:job_id>/", views.JobDetailView.as_view(), name="detail"),
    path("<slug:cluster>/<int:job_id>/summary/", views.job_summary, name="summary"),
    path("<slug:cluster>/<int:job_id>/panels/<slug:panel>/<slug:name>.json", views.panel_figure, name="panel-figure"),
]
