from django.apps import AppConfig


class SaturationConfig(AppConfig):
    name = "apps.saturation"
    label = "saturation"
    verbose_name = "Saturation"

    def ready(self):
        from apps.core.gpu_models import register_gpu_model_provider
        from apps.core.panels import JobPanel, register_job_panel
        from apps.core.refresh import JobRefresher, register_job_refresher

        from . import colourings, columns, panel
        from .selectors import gpu_model_for_job

        register_job_panel(JobPanel(key="saturation", title="GPU saturation", order=10, template="saturation/_job_section.html",
                                    context=panel.context, summary=panel.summary, figures=panel.FIGURES, version=panel.version))
        # Ingestion refreshes the jobs it touches (apps.core): the saturation product updates incrementally.
        register_job_refresher(JobRefresher(name="saturation", order=20, refresh="apps.saturation.services.job_saturation_update"))
        # The per-model table (ceilings, clocks, power) is ours; telemetry's heatmaps read it through core.
        register_gpu_model_provider(gpu_model_for_job)
        columns.register()  # the job list's score column (apps.core.job_columns)
        colourings.register()  # the rank map's GPU colourings (apps.core.gpu_colourings)
        from . import node_findings

        node_findings.register()  # hardware faults for node health and triage (apps.core.node_findings)
