from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "apps.triage"
    label = "triage"
    verbose_name = "Triage"

    def ready(self):
        from . import sections

        sections.register()

        from apps.core.waiting import Waiting, register_waiting

        from .selectors import open_item_count

        register_waiting(Waiting(key="triage", label="triage items open", one="triage item open", order=20, url_name="triage:inbox", url_query="",
                                 count=lambda request: open_item_count()))
