"""Job tokens: what a key of ``Authorization: JobToken bvj_...`` stands for (code running inside one job).

The credential itself, :class:`apps.core.api.authentication.JobTokenAuthentication`, reads the header;
:func:`resolve_job_token` (registered from ``JobsConfig.ready()``) finds the token's job. Only the
endpoints that accept data from inside a job list that class; everywhere else a job token is simply not
a credential.
"""
from django.conf import settings
from rest_framework import exceptions

from .models import Job, JobToken


class JobTokenUser:
    """Stands in for a user while a job token authenticates: can act for its job, nothing else."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, job: Job):
        self.job = job
        self.username = f"job:{job.cluster.name}/{job.job_id}"

    def get_username(self) -> str:
        return self.username

    def has_perm(self, perm, obj=None) -> bool:
        return False

    def __str__(self) -> str:
        return self.username


def resolve_job_token(key: str) -> tuple[JobTokenUser, JobToken]:
    """The job token ``key`` as DRF's ``(user, auth)``; ``AuthenticationFailed`` saying why when it is not valid."""
    token = JobToken.objects.select_related("job__cluster").filter(key_hash=JobToken.hash(key)).first()
    if token is None:
        raise exceptions.AuthenticationFailed("Invalid job token.")
    if not token.is_valid():
        raise exceptions.AuthenticationFailed(
            f"This job token expired: its job ended more than {settings.JOB_TOKEN_GRACE_HOURS} hours ago."
        )
    return JobTokenUser(token.job), token


def token_job(request) -> Job | None:
    """The job a job-token request acts for, or None for ordinary users."""
    return request.auth.job if isinstance(getattr(request, "auth", None), JobToken) else None
