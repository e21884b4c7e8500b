from django.apps import AppConfig


class AppmetricsConfig(AppConfig):
    name = "apps.appmetrics"
    label = "appmetrics"
    verbose_name = "Application metrics"

    def ready(self):
        pass
