"""REST endpoints of the storage app, mounted at the top of /api/v1/ next to the job they belong to."""
app_name = "storage-api"

urlpatterns = []
