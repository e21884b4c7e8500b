from apps.core.views import CapabilityView


class CatalogIndexView(CapabilityView):
    template_name = "catalog/index.html"
