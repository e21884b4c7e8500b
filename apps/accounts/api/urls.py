from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import MeView, ProjectViewSet, TokenView

app_name = "accounts-api"

router = SimpleRouter()
router.register("projects", ProjectViewSet, basename="project")

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("auth/token/", TokenView.as_view(), name="token"),
    *router.urls,
]
