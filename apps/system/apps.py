from django.apps import AppConfig


class SystemConfig(AppConfig):
    name = "apps.system"
    label = "system"
    verbose_name = "System"
