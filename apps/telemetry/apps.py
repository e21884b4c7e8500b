from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "apps.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"

    def ready(self):
        from apps.core.health import register_readiness_check

        from .health import check_telemetry_store

        register_readiness_check("telemetry", check_telemetry_store)
