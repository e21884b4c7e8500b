"""REST endpoints of the telemetry app, mounted under /api/v1/telemetry/."""
from rest_framework.routers import SimpleRouter

app_name = "telemetry-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
