"""Read access to namespaces and requests, always through who is asking.

A team's namespaces and requests are visible to its members (the Slurm account's project) and to
staff; anyone else is told they do not exist (404). Only staff decide on requests; when a team's
envelope names approvers, only they (or a superuser) do.
"""
from django.db.models import QuerySet

from apps.accounts.selectors import slurm_accounts_for_user

from .choices import ManagedNamespaceStateChoices, NamespaceRequestStatusChoices
from .models import ManagedNamespace, NamespaceRequest


def teams_for_user(user) -> list[str]:
    return sorted(slurm_accounts_for_user(user))


def namespaces_for_user(user, *, archived: bool = False) -> QuerySet[ManagedNamespace]:
    queryset = ManagedNamespace.objects.select_related("project")
    if not archived:
        queryset = queryset.exclude(state=ManagedNamespaceStateChoices.ARCHIVED)
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user.is_staff:
        return queryset
    return queryset.filter(project__slurm_account__in=slurm_accounts_for_user(user))


def namespace_get_for_user(user, name: str) -> ManagedNamespace | None:
    return namespaces_for_user(user, archived=True).filter(name=name).first()


def requests_for_user(user) -> QuerySet[NamespaceRequest]:
    queryset = NamespaceRequest.objects.select_related("project", "namespace", "requested_by", "decided_by")
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user.is_staff:
        return queryset
    return queryset.filter(project__slurm_account__in=slurm_accounts_for_user(user))


def approval_queue(user) -> list[NamespaceRequest]:
    from .services import may_approve

    waiting = requests_for_user(user).filter(status=NamespaceRequestStatusChoices.WAITING).order_by("created")
    return [request for request in waiting if may_approve(request, user)]


def approval_queue_count(user) -> int:
    """How many requests wait for ``user``'s decision (the staff page's "what waits" count)."""
    if not getattr(user, "is_staff", False):
        return 0
    return len(approval_queue(user))
