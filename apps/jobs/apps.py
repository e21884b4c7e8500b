from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from . import schema  # noqa: F401 - registers the job token's OpenAPI description
        from .panel import register

        register()
