from apps.core.views import CapabilityView


class JobsIndexView(CapabilityView):
    template_name = "jobs/index.html"
