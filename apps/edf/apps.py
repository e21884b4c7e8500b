from django.apps import AppConfig


class EdfConfig(AppConfig):
    name = "apps.edf"
    label = "edf"
    verbose_name = "EDF"
