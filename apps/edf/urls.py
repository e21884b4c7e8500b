from django.urls import path

from . import views

app_name = "edf"

urlpatterns = [
    path("", views.EdfIndexView.as_view(), name="index"),
]
