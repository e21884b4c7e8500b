"""ASGI entry point (for servers such as uvicorn or daphne)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")

from portal.startup import load_settings_or_exit  # noqa: E402

load_settings_or_exit()

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
