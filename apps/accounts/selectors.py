"""Read queries about users and projects. Other apps ask these, never the models directly."""
from django.db.models import QuerySet

from .models import Project


def _is_person(user) -> bool:
    """A signed-in account of this portal. Stand-ins that authenticate without one (a job token's
    ``JobTokenUser``: no primary key) belong to no project."""
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None)


def project_list_for_user(user) -> QuerySet[Project]:
    """Projects visible to ``user``: all for staff, their own for members, none for anonymous."""
    if not _is_person(user):
        return Project.objects.none()
    if user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def slurm_accounts_for_user(user) -> set[str]:
    """Slurm accounts whose jobs ``user`` may see (staff: check ``user.is_staff`` instead)."""
    if not _is_person(user):
        return set()
    return set(Project.objects.filter(memberships__user=user).values_list("slurm_account", flat=True))


def user_is_staff(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_staff)
