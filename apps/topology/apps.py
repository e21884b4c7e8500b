from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "apps.topology"
    label = "topology"
    verbose_name = "Topology"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        register_job_panel(JobPanel(key="allocation", title="Allocation on the network", order=30,
                                    template="topology/_job_section.html", context=panel.context, summary=panel.summary,
                                    figures=panel.FIGURES, version=panel.version))
