"""The configured telemetry store(s), built once per process from ``TELEMETRY_BACKENDS``."""
from functools import lru_cache

from django.conf import settings
from django.utils.module_loading import import_string

from .backends.base import TelemetryBackend, TelemetryUnavailable


def telemetry_store(alias: str = "default") -> TelemetryBackend:
    """The store named ``alias`` (one instance per alias and process, whether named or defaulted)."""
    return _built(alias)


@lru_cache(maxsize=None)
def _built(alias: str) -> TelemetryBackend:
    try:
        config = settings.TELEMETRY_BACKENDS[alias]
    except KeyError:
        raise TelemetryUnavailable(f"no telemetry store named {alias!r} in TELEMETRY_BACKENDS") from None
    try:
        backend_class = import_string(config["BACKEND"])
    except ImportError as exc:
        raise TelemetryUnavailable(f"telemetry backend {config['BACKEND']!r} cannot be imported: {exc}") from exc
    return backend_class(**config.get("OPTIONS", {}))


def reset_telemetry_stores() -> None:
    """Forget built stores (tests that change settings)."""
    _built.cache_clear()
