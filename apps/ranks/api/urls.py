"""REST endpoints of the ranks app, mounted under /api/v1/ranks/."""
from rest_framework.routers import SimpleRouter

app_name = "ranks-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
