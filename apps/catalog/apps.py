from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "apps.catalog"
    label = "catalog"
    verbose_name = "Catalog"

    def ready(self):
        from apps.core.waiting import Waiting, register_waiting

        from .selectors import waiting_incidents

        register_waiting(Waiting(key="incidents", label="open incidents", one="open incident", order=30, url_name="catalog:incidents",
                                 url_query="?state=open", count=lambda request: waiting_incidents()))
