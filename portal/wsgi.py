"""WSGI entry point (gunicorn ``portal.wsgi``)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")

from portal.startup import load_settings_or_exit  # noqa: E402

load_settings_or_exit()

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
