from django.urls import path

from . import views

app_name = "topology"

urlpatterns = [
    path("", views.TopologyIndexView.as_view(), name="index"),
]
