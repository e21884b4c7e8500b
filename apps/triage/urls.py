from django.urls import path

from . import views

app_name = "triage"

urlpatterns = [
    path("", views.InboxView.as_view(), name="inbox"),
    path("refresh/", views.RefreshView.as_view(), name="refresh"),
    path("<int:pk>/", views.ItemChangeView.as_view(), name="item"),
]
