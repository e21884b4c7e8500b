from django.apps import AppConfig


class SystemConfig(AppConfig):
    name = "apps.system"
    label = "system"
    verbose_name = "System"

    def ready(self):
        from . import colourings, host_panel, panel

        panel.register()  # the job in context, on the job page
        host_panel.register()  # the host side of the job's nodes, linking to each node's history (issue 39)
        colourings.register()  # the topology page's "network load" (switches and global links)
