"""REST endpoints of the jobs app, mounted under /api/v1/jobs/."""
from rest_framework.routers import SimpleRouter

app_name = "jobs-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
