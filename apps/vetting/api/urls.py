"""REST endpoints of the vetting app, mounted under /api/v1/vetting/."""
from rest_framework.routers import SimpleRouter

app_name = "vetting-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
