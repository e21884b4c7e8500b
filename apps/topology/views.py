from apps.core.views import CapabilityView


class TopologyIndexView(CapabilityView):
    template_name = "topology/index.html"
