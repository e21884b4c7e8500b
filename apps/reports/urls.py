from django.urls import path
from django.views.generic import TemplateView

app_name = "reports"

# Placeholder until the page lands (issue 19): the navigation needs the name.
urlpatterns = [path("", TemplateView.as_view(template_name="core/capability.html"), name="index")]
