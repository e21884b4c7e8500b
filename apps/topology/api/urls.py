"""REST endpoints of the topology app, mounted under /api/v1/topology/."""
from rest_framework.routers import SimpleRouter

app_name = "topology-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
