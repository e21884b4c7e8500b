"""REST endpoints of the catalog app, mounted under /api/v1/catalog/."""
from django.urls import path

from . import views

app_name = "catalog-api"

urlpatterns = [
    path("products/", views.ProductListView.as_view(), name="products"),
    path("products/<slug:name>/", views.ProductDetailView.as_view(), name="product"),
    path("products/<slug:name>/checks/", views.ProductChecksView.as_view(), name="checks"),
    path("products/<slug:name>/run/", views.RunChecksView.as_view(), name="run"),
    path("incidents/", views.IncidentListView.as_view(), name="incidents"),
    path("incidents/<int:pk>/", views.IncidentDetailView.as_view(), name="incident"),
    path("subscriptions/", views.SubscriptionsView.as_view(), name="subscriptions"),
]
