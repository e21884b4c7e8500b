from django.apps import AppConfig


class SaturationConfig(AppConfig):
    name = "apps.saturation"
    label = "saturation"
    verbose_name = "Saturation"
