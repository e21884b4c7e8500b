"""REST endpoints of the catalog app, mounted under /api/v1/catalog/."""
from rest_framework.routers import SimpleRouter

app_name = "catalog-api"

router = SimpleRouter()

urlpatterns = [*router.urls]
