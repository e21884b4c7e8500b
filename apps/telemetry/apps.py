from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "apps.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"

    def ready(self):
        from apps.core.readiness import register_readiness_check

        from .readiness import check_telemetry_store

        register_readiness_check("telemetry", check_telemetry_store)

        from apps.core.panels import JobPanel, register_job_panel

        from . import panel

        register_job_panel(JobPanel(key="telemetry", title="GPU telemetry", order=20, template="telemetry/_job_section.html",
                                    context=panel.context, summary=panel.summary, version=panel.version))
        register_job_panel(JobPanel(key="versions", title="Node consistency", order=55,
                                    template="telemetry/_versions_section.html", context=panel.versions_context,
                                    summary=panel.versions_summary, version=panel.versions_version))

        from apps.core.refresh import JobRefresher, register_job_refresher

        # Live refresh: the cube first (order 10), so products built on the samples (saturation, 20) follow.
        register_job_refresher(JobRefresher(name="telemetry", order=10, refresh="apps.telemetry.services.job_telemetry_update"))
