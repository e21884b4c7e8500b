from django.apps import AppConfig


class SystemConfig(AppConfig):
    name = "apps.system"
    label = "system"
    verbose_name = "System"

    def ready(self):
        from . import colourings, panel

        panel.register()  # the job in context, on the job page
        colourings.register()  # the topology page's "network load" (switches and global links)
