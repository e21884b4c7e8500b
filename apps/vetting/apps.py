from django.apps import AppConfig


class VettingConfig(AppConfig):
    name = "apps.vetting"
    label = "vetting"
    verbose_name = "Vetting"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from .panel import context, summary

        register_job_panel(JobPanel(key="vetting", title="Node vetting", order=50, template="vetting/_job_section.html",
                                    context=context, summary=summary))

        from . import colourings

        colourings.register()  # the topology page's "vetting" colouring
