"""REST endpoints of the edf app, mounted under /api/v1/edf/."""
from rest_framework.routers import SimpleRouter

app_name = "edf-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
