"""Access to jobs, always through who is asking: the rule lives here and nowhere else.

A job is visible to its Slurm user, to members of its Slurm account, and to staff. A job token
sees only its own job. Everyone else is told the job does not exist (404), never "forbidden",
so job ids of other people leak nothing.

Acting for a job (writing its layout, posting its data, minting its tokens) is narrower: its
Slurm user, staff, and -- except for minting tokens -- the job's own token. Account members may
look but not act (``job_may_act``, ``job_may_issue_token``).
"""
from django.db.models import Q, QuerySet

from apps.accounts.selectors import slurm_accounts_for_user

from .authentication import JobTokenUser
from .choices import JobStateChoices
from .models import Cluster, Job


def _token_job(user, token_job: Job | None) -> Job | None:
    """The job a job token acts for: given by the view, or read from the token's stand-in user, so a
    view that forgets to pass ``token_job`` still never shows a token anything beyond its job."""
    if token_job is not None:
        return token_job
    return user.job if isinstance(user, JobTokenUser) else None


def job_list_for_user(user, token_job: Job | None = None) -> QuerySet[Job]:
    queryset = Job.objects.select_related("cluster")
    token_job = _token_job(user, token_job)
    if token_job is not None:
        return queryset.filter(pk=token_job.pk)
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user.is_staff:
        return queryset
    return queryset.filter(Q(user_name=user.get_username()) | Q(account__in=slurm_accounts_for_user(user)))


def job_get_for_user(user, cluster: str, job_id: int, token_job: Job | None = None) -> Job | None:
    return job_list_for_user(user, token_job).filter(cluster__name=cluster, job_id=job_id).first()


def job_may_act(user, job: Job, token_job: Job | None = None) -> bool:
    """Whether the caller may change ``job``'s data (layout, uploads): the job's own token, its
    Slurm user, or staff. Members of its account may see it but not act for it."""
    token_job = _token_job(user, token_job)
    if token_job is not None:
        return token_job.pk == job.pk
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_staff) or user.get_username() == job.user_name


def job_may_issue_token(user, job: Job) -> bool:
    """Whether ``user`` may mint a job token for ``job``: its Slurm user or staff, never a job token
    (a token must not breed tokens) and never an account member (a token can write)."""
    if isinstance(user, JobTokenUser) or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_staff) or user.get_username() == job.user_name


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
    running = Job.objects.filter(state=JobStateChoices.RUNNING).exclude(node_list=[]).select_related("cluster")
    visible = set(job_list_for_user(user).filter(state=JobStateChoices.RUNNING).values_list("pk", flat=True))
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
