from django.apps import AppConfig


class VettingConfig(AppConfig):
    name = "apps.vetting"
    label = "vetting"
    verbose_name = "Vetting"
