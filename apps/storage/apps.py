from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "apps.storage"
    label = "storage"
    verbose_name = "Storage"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        # After the network (25): the job's file-system activity lined up with its GPUs' idle time.
        register_job_panel(JobPanel(key=panel.KEY, title="Storage", order=26, template="storage/_job_section.html",
                                    context=panel.context, summary=panel.summary, figures=panel.FIGURES, version=panel.version))
