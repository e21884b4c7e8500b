from apps.core.views import CapabilityView


class VettingIndexView(CapabilityView):
    template_name = "vetting/index.html"
