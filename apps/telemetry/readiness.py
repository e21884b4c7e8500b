"""Readiness of the telemetry store, reported on /readyz (informational: pages without GPU charts
keep working when the store is down)."""
from apps.core.readiness import STATUS_OK, STATUS_WARN, CheckResult

from .backends.base import TelemetryUnavailable
from .store import telemetry_store


def check_telemetry_store() -> CheckResult:
    try:
        store = telemetry_store()
        store.check()
    except TelemetryUnavailable as exc:
        return CheckResult(STATUS_WARN, f"telemetry store unavailable: {exc}"[:300], critical=False)
    return CheckResult(STATUS_OK, f"{store.name} answers", critical=False)
