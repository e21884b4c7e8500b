from django.urls import path

from . import views

app_name = "vetting"

urlpatterns = [
    path("", views.VettingIndexView.as_view(), name="index"),
]
