from django.urls import path

from . import views

app_name = "system"

urlpatterns = [
    path("", views.SystemView.as_view(), name="index"),
    path("data.json", views.system_data, name="data"),
    path("histogram.json", views.histogram_data, name="histogram"),
    path("versions/", views.VersionsView.as_view(), name="versions"),
]
