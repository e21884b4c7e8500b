from django.apps import AppConfig


class SystemConfig(AppConfig):
    name = "apps.system"
    label = "system"
    verbose_name = "System"

    def ready(self):
        from . import panel

        panel.register()  # the job in context, on the job page
