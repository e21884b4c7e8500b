from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.JobsIndexView.as_view(), name="index"),
]
