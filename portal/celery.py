"""The Celery application shared by every app.

Configuration comes from Django settings under the ``CELERY_`` namespace; tasks are discovered in
``apps/<app>/tasks.py``. Task names are explicit (``"<app>.<verb>_<noun>"``) so a rename never
orphans queued messages.
"""
import os

from celery import Celery

from .broker import install as install_atomic_filesystem_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")
# The embedded profile's filesystem:// broker writes whole message files only (portal/broker.py).
install_atomic_filesystem_broker()

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect
def _fail_fast_on_bad_settings(sender=None, **kwargs):
    # Fired the first time Celery reads its configuration, which for the worker and beat is while
    # the command line is parsed: check Django's settings first so a missing production value
    # gives one line instead of a traceback from deep inside the CLI.
    from portal.startup import load_settings_or_exit

    load_settings_or_exit()
