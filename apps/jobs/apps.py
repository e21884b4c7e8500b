from django.apps import AppConfig


def job_for_refresh(job_pk: int):
    """The job a live refresh (apps.core.live) brings up to date, with its cluster; None when it is gone."""
    from .models import Job

    return Job.objects.select_related("cluster").filter(pk=job_pk).first()


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from apps.core.api.authentication import register_job_token_resolver
        from apps.core.live import register_job_loader

        from . import colourings, panel, schema, sections  # noqa: F401 - schema registers the job token's OpenAPI description
        from .authentication import resolve_job_token

        # Job tokens (the credential is apps.core.api.authentication): what a key stands for is ours.
        register_job_token_resolver(resolve_job_token)
        panel.register()
        colourings.register()  # the topology page's "running job" colouring
        sections.register()  # the Slurm clusters on the staff page
        register_job_loader(job_for_refresh)  # live refresh of job products
