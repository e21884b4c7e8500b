"""Pages of the appmetrics app, mounted under /jobs/ beside the job pages: /jobs/compare/?jobs=c/1,c/2."""
from django.urls import path

from . import views

app_name = "appmetrics"

urlpatterns = [
    path("compare/", views.compare, name="compare"),
]
