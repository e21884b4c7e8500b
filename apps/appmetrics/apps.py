from django.apps import AppConfig


class AppmetricsConfig(AppConfig):
    name = "apps.appmetrics"
    label = "appmetrics"
    verbose_name = "Application metrics"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        # Right after GPU saturation (order 10), before the GPU telemetry (20): the training's own numbers next to
        # the verdict on its GPUs.
        register_job_panel(JobPanel(key=panel.KEY, title="Training throughput", order=15, template="appmetrics/_job_section.html",
                                    context=panel.context, summary=panel.summary, figures=panel.FIGURES, version=panel.version))
