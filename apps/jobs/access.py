"""The one way an API view of any app finds the job a request names: seen through the jobs app's rule, changed
only by those who may act for it (``selectors.job_may_act``: the job's own token, its Slurm user, staff).

Apps above jobs (ranks, appmetrics, ...) call :func:`job_for_request` instead of writing the rule again.
"""
from django.http import Http404
from rest_framework import exceptions

from .authentication import token_job
from .selectors import job_get_for_user, job_may_act


def job_for_request(request, cluster: str, job_id: int, *, write: bool = False, what: str = "change this job's data"):
    """The job if the caller may see it (404, as if missing, otherwise); with ``write``, a 403 saying who may
    ``what`` for the project's members, who may look but not change it."""
    job = job_get_for_user(request.user, cluster, job_id, token_job(request))
    if job is None:
        raise Http404
    if write and not job_may_act(request.user, job, token_job(request)):
        raise exceptions.PermissionDenied(f"Only the job's user, staff or the job's own token may {what}.")
    return job
