from django.urls import path

from . import views

app_name = "namespaces"

urlpatterns = [
    path("", views.NamespacesIndexView.as_view(), name="index"),
]
