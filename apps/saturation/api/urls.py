"""REST endpoints of the saturation app, mounted under /api/v1/saturation/."""
from rest_framework.routers import SimpleRouter

app_name = "saturation-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
