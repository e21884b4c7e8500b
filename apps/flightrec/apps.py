from django.apps import AppConfig


class FlightrecConfig(AppConfig):
    name = "apps.flightrec"
    label = "flightrec"
    verbose_name = "Flight Recorder"

    def ready(self):
        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        # After the ranks (whose groups it names): a hang's culprit is on the first screen already, as a finding that
        # links here; every other job, which has no dump, keeps its saturation and throughput panels first.
        from apps.core.hang_verdicts import register_hang_verdict_source

        from .selectors import hang_words

        # Why a job hung, for the apps that judge its end (the job's first screen, campaigns' failures).
        register_hang_verdict_source("flightrec", hang_words)
        register_job_panel(JobPanel(key=panel.KEY, title="Stuck collectives", order=45, template="flightrec/_job_section.html",
                                    context=panel.context, summary=panel.summary, version=panel.version))
