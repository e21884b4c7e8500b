from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "apps.triage"
    label = "triage"
    verbose_name = "Triage"

    def ready(self):
        from . import sections

        sections.register()
