from apps.core.views import CapabilityView


class EdfIndexView(CapabilityView):
    template_name = "edf/index.html"
