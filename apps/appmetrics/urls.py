from django.urls import path

from . import views

app_name = "appmetrics"

urlpatterns = [
    path("compare/", views.compare, name="compare"),
]
