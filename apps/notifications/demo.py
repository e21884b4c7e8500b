"""Demo part: the demo researcher's projects opt in to both mails, so beat's ``notifications.notify_running_jobs``
mails (to the worker's console in the embedded profile) about their wasteful and straggling running jobs, and the
notifications page has something to show."""
from apps.core.demo import DemoContext, demo_part


def reset() -> None:
    """The opt-ins of the demo's projects go with the projects, the mails with the jobs; only the digests stay."""
    from .models import StaffDigest

    StaffDigest.objects.all().delete()


@demo_part("notifications", order=95, reset=reset)
def build(context: DemoContext) -> dict:
    from apps.accounts.models import Project

    from .models import ProjectNotifications
    from .selectors import job_is_wasteful, running_records

    accounts = sorted((context.shared.get("memberships") or {}).get("demo", set()))
    projects = list(Project.objects.filter(slurm_account__in=accounts))
    for project in projects:
        ProjectNotifications.objects.update_or_create(project=project, defaults={"waste": True, "straggler": True,
                                                                                 "changed_by": "demo"})
    records = running_records([project.slurm_account for project in projects])
    wasteful = sum(1 for job, record in records if job_is_wasteful(job, record))
    stragglers = sum(1 for _, record in records if record is not None and record.stragglers)
    return {"projects opted in": len(projects), "running jobs watched": len(records), "wasteful now": wasteful,
            "with stragglers": stragglers}
