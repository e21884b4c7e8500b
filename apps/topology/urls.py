from django.urls import path

from . import views

app_name = "topology"

urlpatterns = [
    path("", views.TopologyIndexView.as_view(), name="index"),
    path("groups/<int:number>/", views.GroupDetailView.as_view(), name="group"),
    path("nodes/<str:hostname>/", views.NodeDetailView.as_view(), name="node"),
]
