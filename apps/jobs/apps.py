from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from apps.core.api.authentication import register_job_token_resolver

        from . import schema  # noqa: F401 - registers the job token's OpenAPI description
        from .authentication import resolve_job_token

        # Job tokens (the credential is apps.core.api.authentication): what a key stands for is ours.
        register_job_token_resolver(resolve_job_token)
        from .panel import register

        register()
