from django.apps import AppConfig


class RanksConfig(AppConfig):
    name = "apps.ranks"
    label = "ranks"
    verbose_name = "Ranks"
