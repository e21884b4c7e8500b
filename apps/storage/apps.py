from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "apps.storage"
    label = "storage"
    verbose_name = "Storage"

    def ready(self):
        pass  # the job page's storage panel registers here
