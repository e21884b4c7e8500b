"""REST endpoints of the namespaces app, mounted under /api/v1/namespaces/."""
from rest_framework.routers import SimpleRouter

app_name = "namespaces-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
