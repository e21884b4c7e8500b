"""Read access to saved EDFs, always through who is asking.

An EDF is visible to its owner, to members of the projects it is shared with, and to staff.
Everyone else is told it does not exist (404). Only the owner may change it.
"""
from django.db.models import Q, QuerySet

from .models import EdfDocument, EdfVersion


def edf_list_for_user(user) -> QuerySet[EdfDocument]:
    queryset = EdfDocument.objects.select_related("owner").prefetch_related("shared_with")
    if not getattr(user, "is_authenticated", False):
        return queryset.none()
    if user.is_staff:
        return queryset
    return queryset.filter(Q(owner=user) | Q(shared_with__memberships__user=user)).distinct()


def edf_get_for_user(user, owner: str, name: str) -> EdfDocument | None:
    return edf_list_for_user(user).filter(owner__username=owner, name=name).first()


def edf_can_edit(user, document: EdfDocument) -> bool:
    return getattr(user, "is_authenticated", False) and document.owner_id == user.pk


def edf_version(document: EdfDocument, number: int | None = None) -> EdfVersion | None:
    versions = document.versions.all()
    return versions.filter(number=number).first() if number is not None else versions.order_by("-number").first()


def edf_base_texts(user, owner) -> dict[str, str]:
    """name -> latest text of the saved EDFs of ``owner`` that ``user`` may read: the portal's
    stand-in for the owner's ${HOME}/.edf when resolving base_environment."""
    documents = edf_list_for_user(user).filter(owner=owner)
    latest = {}
    for version in EdfVersion.objects.filter(document__in=documents).order_by("document_id", "-number").select_related("document"):
        latest.setdefault(version.document.name, version.text)
    return latest
