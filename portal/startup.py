"""Fail fast, in one line, when the settings cannot be loaded.

Every entry point (manage.py, WSGI, ASGI, Celery) calls :func:`load_settings_or_exit` before
Django is set up, so an operator who forgot ``SECRET_KEY`` sees one sentence naming what is
missing instead of a forty-line traceback.
"""
import sys

EXIT_BAD_CONFIGURATION = 78  # EX_CONFIG from sysexits.h: systemd and supervisors show it as a config error


def load_settings_or_exit() -> None:
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018 - forces the settings module to load
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"Belvedere cannot start: {exc}\n")
        sys.exit(EXIT_BAD_CONFIGURATION)
