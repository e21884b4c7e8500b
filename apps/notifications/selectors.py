"""Reads of the notifications app, with its access rules (here, once):

* a project's opt-ins are seen by its members and staff; anyone else is told the project does not exist (404);
* they are switched by the project's managers (``Membership.role == manager``) and staff: the mails go to every
  member's jobs, so it is a decision for the project, not for each member;
* the mails listed are those about jobs the user may see (``apps.jobs.selectors.job_list_for_user``).
"""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Window
from django.urls import reverse

from apps.accounts.choices import MembershipRoleChoices
from apps.accounts.models import Membership, Project
from apps.accounts.selectors import project_list_for_user
from apps.core.models import TaskRun
from apps.jobs.choices import JobStateChoices
from apps.jobs.models import Job
from apps.jobs.selectors import job_list_for_user
from apps.saturation.models import JobSaturation
from apps.saturation.selectors import job_waste as saturation_job_waste

from apps.triage.selectors import triage_items

from .messages import DigestItem
from .choices import NotificationSentStatusChoices
from .models import NotificationSent, ProjectNotifications


DIGEST_MAX_ITEMS = 500


def project_get_for_user(user, account: str) -> Project | None:
    """The project of Slurm account ``account`` when ``user`` may see it (member or staff), else None."""
    return project_list_for_user(user).filter(slurm_account=account).first()


def project_notifications_get(project: Project) -> ProjectNotifications:
    """The project's opt-ins; an unsaved row with everything off when it never switched any."""
    found = ProjectNotifications.objects.filter(project=project).first()
    return found or ProjectNotifications(project=project)


def project_notifications_may_change(user, project: Project) -> bool:
    if not getattr(user, "is_authenticated", False) or getattr(user, "pk", None) is None:
        return False
    if user.is_staff:
        return True
    return Membership.objects.filter(user=user, project=project, role=MembershipRoleChoices.ROLE_MANAGER).exists()


def project_managers(project: Project) -> list[str]:
    return list(Membership.objects.filter(project=project, role=MembershipRoleChoices.ROLE_MANAGER)
                .order_by("user__username").values_list("user__username", flat=True))


def project_notifications_for_user(user) -> list[dict]:
    """Every project ``user`` sees, with its opt-ins, its managers and whether ``user`` may switch them."""
    projects = list(project_list_for_user(user).order_by("slurm_account"))
    rows = {row.project_id: row for row in ProjectNotifications.objects.filter(project__in=[p.pk for p in projects])}
    managers: dict[int, list[str]] = {}
    managed: set[int] = set()
    for membership in Membership.objects.filter(project__in=[p.pk for p in projects], role=MembershipRoleChoices.ROLE_MANAGER
                                                ).select_related("user").order_by("user__username"):
        managers.setdefault(membership.project_id, []).append(membership.user.get_username())
        if membership.user_id == user.pk:
            managed.add(membership.project_id)
    return [{"project": project, "settings": rows.get(project.pk) or ProjectNotifications(project=project),
             "managers": managers.get(project.pk, []), "may_change": bool(user.is_staff) or project.pk in managed}
            for project in projects]


def _sent_visible_to(user) -> QuerySet[NotificationSent]:
    """The mails about jobs ``user`` may see (every mail for staff)."""
    queryset = NotificationSent.objects.all()
    if not user.is_staff:
        queryset = queryset.filter(job__in=job_list_for_user(user).values("pk"))
    return queryset


def notifications_sent_for_user(user, limit: int = 50, *,
                                counted_since: datetime | None = None) -> QuerySet[NotificationSent]:
    """The latest mails about jobs ``user`` may see. With ``counted_since``, each row also carries how many of *all*
    those mails (not only the ``limit`` listed) were recorded since then per status, as ``since_<status>``: window
    counts, taken before the limit, in the same query."""
    queryset = _sent_visible_to(user).select_related("job", "job__cluster")
    if counted_since is not None:
        queryset = queryset.annotate(**{
            f"since_{status}": Window(Count("pk", filter=Q(sent_at__gte=counted_since, status=status)))
            for status in NotificationSentStatusChoices.values})
    return queryset.order_by("-sent_at", "-pk")[:limit]


def notifications_sent_counts(rows) -> dict[str, int]:
    """Per status, the counts a ``notifications_sent_for_user(..., counted_since=...)`` list carries (0 when empty)."""
    first = next(iter(rows), None)
    return {status: getattr(first, f"since_{status}", 0) if first is not None else 0
            for status in NotificationSentStatusChoices.values}


def last_check():
    """The last finished run of ``notifications.notify_running_jobs`` (None when beat never ran it)."""
    return (TaskRun.objects.filter(name="notifications.notify_running_jobs", finished__isnull=False)
            .order_by("-finished").only("finished", "status", "message").first())


def mail_leaves() -> bool:
    """Whether the configured backend sends mail anywhere (console, file, in-memory and dummy backends do not)."""
    return not any(word in settings.EMAIL_BACKEND for word in (".console.", ".locmem.", ".dummy.", ".filebased."))


def job_link(job: Job) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("jobs:detail", kwargs={"cluster": job.cluster.name, "job_id": job.job_id})


def running_records(accounts: list[str] | None = None) -> list[tuple[Job, JobSaturation | None]]:
    """Running jobs (of ``accounts`` when given) with their saturation record (None when never scored)."""
    jobs = Job.objects.filter(state=JobStateChoices.RUNNING).select_related("cluster").order_by("pk")
    if accounts is not None:
        jobs = jobs.filter(account__in=accounts)
    jobs = list(jobs)
    records = {record.job_id: record for record in JobSaturation.objects.filter(job__in=[job.pk for job in jobs])}
    return [(job, records.get(job.pk)) for job in jobs]


def job_is_wasteful(job: Job, record: JobSaturation | None) -> bool:
    """Scored and wasteful (apps.saturation.selectors.job_waste, the triage inbox's reading)."""
    return record is not None and saturation_job_waste(job, record).wasteful


def job_waste(job: Job, record: JobSaturation, now: datetime):
    return saturation_job_waste(job, record, now).waste


def digest_items() -> list[DigestItem]:
    """The triage inbox's open items (new and acknowledged; muted and resolved left out), in the inbox's order."""
    site = settings.SITE_URL.rstrip("/")
    return [DigestItem(kind=item.kind, title=item.title, detail=item.detail, owner=item.owner, state=item.state,
                       url=site + item.url if item.url.startswith("/") else item.url, lost_gpu_hours=item.gpu_hours_lost)
            for item in triage_items(state="open")[:DIGEST_MAX_ITEMS]]
