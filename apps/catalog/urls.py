from django.urls import path

from . import views

app_name = "catalog"

urlpatterns = [
    path("", views.CatalogIndexView.as_view(), name="index"),
    path("incidents/", views.IncidentsView.as_view(), name="incidents"),
    path("explorer/", views.ExplorerView.as_view(), name="explorer"),
    path("explorer/app/", views.explorer_app, name="explorer-app"),
    path("explorer/app/<path:path>", views.explorer_app),
    path("<slug:name>/", views.ProductView.as_view(), name="product"),
]
