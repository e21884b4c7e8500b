"""Read access to jobs, always through who is asking.

A job is visible to its Slurm user, to members of its Slurm account, and to staff. A job token
sees only its own job. Everyone else is told the job does not exist (404), never "forbidden",
so job ids of other people leak nothing.
"""
from django.db.models import Q, QuerySet

from apps.accounts.selectors import slurm_accounts_for_user

from .models import Cluster, Job


def job_list_for_user(user, token_job: Job | None = None) -> QuerySet[Job]:
    queryset = Job.objects.select_related("cluster")
    if token_job is not None:
        return queryset.filter(pk=token_job.pk)
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user.is_staff:
        return queryset
    return queryset.filter(Q(user_name=user.get_username()) | Q(account__in=slurm_accounts_for_user(user)))


def job_get_for_user(user, cluster: str, job_id: int, token_job: Job | None = None) -> Job | None:
    return job_list_for_user(user, token_job).filter(cluster__name=cluster, job_id=job_id).first()


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.order_by("name")
