"""REST endpoints of the network app, mounted at the top of /api/v1/ next to the job they belong to."""
app_name = "network-api"

urlpatterns = []
