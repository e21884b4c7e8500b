"""Job tokens: ``Authorization: JobToken bvj_...`` for code running inside one job.

Only the endpoints that accept data from inside a job list this class; everywhere else a job
token is simply not a credential.
"""
from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

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


class JobTokenAuthentication(BaseAuthentication):
    keyword = "JobToken"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].decode(errors="replace").lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid job token header: expected 'JobToken <key>'.")
        key = parts[1].decode(errors="replace")
        token = JobToken.objects.select_related("job__cluster").filter(key_hash=JobToken.hash(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid job token.")
        if not token.is_valid():
            raise exceptions.AuthenticationFailed(
                f"This job token expired: its job ended more than {settings.JOB_TOKEN_GRACE_HOURS} hours ago."
            )
        return JobTokenUser(token.job), token

    def authenticate_header(self, request):
        return self.keyword


def token_job(request) -> Job | None:
    """The job a job-token request acts for, or None for ordinary users."""
    return request.auth.job if isinstance(getattr(request, "auth", None), JobToken) else None
