from apps.core.views import CapabilityView


class NamespacesIndexView(CapabilityView):
    template_name = "namespaces/index.html"
