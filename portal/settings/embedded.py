"""Embedded default profile: one machine, no servers to install.

SQLite for the database, kombu's filesystem transport as the Celery broker, the embedded
telemetry store, all under ``BELVEDERE_DATA_DIR`` (``./var`` by default). A real worker and beat
still run (``make run`` starts them beside the web server).
"""
import secrets

from .base import *  # noqa: F401,F403
from .base import DATA_DIR, SECRET_KEY

BELVEDERE_PROFILE = "embedded"

DATA_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key() -> str:
    # A per-installation key kept beside the database, so sessions survive restarts and no key
    # is ever committed. Production must set SECRET_KEY instead (production.py enforces it).
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = SECRET_KEY or _local_secret_key()
# Serve static files straight from the apps' folders: no collectstatic step for `make run`.
# Whitenoise still sends the .br/.gz copy that sits beside a file (the Plotly bundle's are built
# with it, static/vendor/plotly/); files without one go out uncompressed in this profile.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Mail is printed by the worker (the console backend), not sent, unless EMAIL_BACKEND says otherwise.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")  # noqa: F405
