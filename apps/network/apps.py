from django.apps import AppConfig


class NetworkConfig(AppConfig):
    name = "apps.network"
    label = "network"
    verbose_name = "Network"

    def ready(self):
        pass  # the job page's network panel registers here
