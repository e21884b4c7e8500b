"""The Celery application shared by every app.

Configuration comes from Django settings under the ``CELERY_`` namespace; tasks are discovered in
``apps/<app>/tasks.py``. Task names are explicit (``"<app>.<verb>_<noun>"``) so a rename never
orphans queued messages.
"""
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.import_modules.connect
def _fail_fast_on_bad_settings(sender=None, **kwargs):
    # The worker and beat import task modules right after start-up: check settings first so a
    # missing production value gives one line, not a traceback from deep inside Django.
    from portal.startup import load_settings_or_exit

    load_settings_or_exit()
