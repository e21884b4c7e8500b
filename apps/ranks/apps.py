from django.apps import AppConfig


class RanksConfig(AppConfig):
    name = "apps.ranks"
    label = "ranks"
    verbose_name = "Ranks"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        register_job_panel(JobPanel(key="ranks", title="Megatron ranks", order=40, template="ranks/_job_section.html",
                                    context=panel.context, summary=panel.summary))
