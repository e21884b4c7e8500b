from django.apps import AppConfig


class FlightrecConfig(AppConfig):
    name = "apps.flightrec"
    label = "flightrec"
    verbose_name = "Flight Recorder"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        # Right after the job's end and before the telemetry panels: a hang's culprit is the first thing to read.
        register_job_panel(JobPanel(key=panel.KEY, title="Stuck collectives", order=12, template="flightrec/_job_section.html",
                                    context=panel.context, summary=panel.summary, version=panel.version))
