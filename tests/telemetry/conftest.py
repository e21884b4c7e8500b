import pytest


@pytest.fixture
def store(settings, tmp_path):
    """A fresh embedded telemetry store for one test, configured as the portal's default."""
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store

    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(tmp_path / "telemetry")}}}
    reset_telemetry_stores()
    yield telemetry_store()
    reset_telemetry_stores()
