from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"
    verbose_name = "Core"

    def ready(self):
        # The embedded broker puts back the messages of a worker that died; the runs of those tasks say so.
        from portal.broker import on_restore

        from . import checks  # noqa: F401  (registers the system checks)
        from .tasks import mark_runs_requeued

        on_restore(mark_runs_requeued)
