from django.apps import AppConfig


class NetworkConfig(AppConfig):
    name = "apps.network"
    label = "network"
    verbose_name = "Network"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        # After the GPU telemetry (20), before the allocation on the network (30): the NICs next to the GPUs they serve.
        register_job_panel(JobPanel(key=panel.KEY, title="Network", order=25, template="network/_job_section.html",
                                    context=panel.context, summary=panel.summary))
