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


OTHER_JOBS = "other jobs"
OTHER_USERS_JOBS = "other users' jobs"


def running_job_labels_for_user(user, limit: int = 10) -> dict[str, str]:
    """hostname → label of the running job on it, for colouring the topology by job.

    The ``limit`` largest jobs the user may see get their own label ("alps/123 train"); their
    other visible jobs share one label, and jobs they may not see are only "other users' jobs",
    so the map never shows whose job runs where.
    """
    running = Job.objects.filter(state="RUNNING").exclude(node_list=[]).select_related("cluster")
    visible = set(job_list_for_user(user).filter(state="RUNNING").values_list("pk", flat=True))
    jobs = sorted(running, key=lambda job: (-(job.node_count or 0), job.job_id))
    labels: dict[str, str] = {}
    named = 0
    for job in jobs:
        if job.pk in visible and named < limit:
            label = f"{job.cluster.name}/{job.display_id} {job.name[:30]}".strip()
            named += 1
        elif job.pk in visible:
            label = OTHER_JOBS
        else:
            label = OTHER_USERS_JOBS
        for hostname in job.node_list:
            labels.setdefault(hostname, label)
    return labels
