"""REST endpoints of the notifications app, mounted under /api/v1/notifications/."""
from django.urls import path

from . import views

app_name = "notifications-api"

urlpatterns = [
    path("projects/<str:account>/", views.ProjectNotificationsView.as_view(), name="project"),
    path("sent/", views.NotificationSentListView.as_view(), name="sent"),
]
