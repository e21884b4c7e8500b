"""Writes to saved EDFs. Every save appends a version in one transaction; nothing is edited in place."""
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max

from apps.accounts.models import Project

from .models import EdfDocument, EdfVersion, edf_name_validator
from .selectors import edf_base_texts
from .validator import ERROR, WARNING, validate
from .vocabulary import MAX_EDF_CHARS


def _check_text(text: str) -> None:
    if not isinstance(text, str):
        raise ValidationError({"text": "The EDF must be text."})
    if len(text) > MAX_EDF_CHARS:
        raise ValidationError({"text": f"The EDF has {len(text):,} characters; at most {MAX_EDF_CHARS:,} are accepted."})
    if "\x00" in text:
        raise ValidationError({"text": "The EDF contains a NUL character; it is not a text file."})


class EdfGone(Exception):
    """The EDF was deleted (by a concurrent request) after the caller found it; nothing was written."""

    def __init__(self, document: EdfDocument):
        super().__init__(f"The EDF {document.name} was deleted while this change was being saved; nothing was written.")


def _locked(document: EdfDocument) -> EdfDocument:
    """The document's row, locked until the transaction ends; EdfGone if it was deleted meanwhile (a DELETE
    that won the race), so a change never lands half-written on a document that no longer exists."""
    locked = EdfDocument.objects.select_for_update().filter(pk=document.pk).first()
    if locked is None:
        raise EdfGone(document)
    return locked


def _append_version(document: EdfDocument, text: str, note: str, user) -> EdfVersion:
    result = validate(text, base_environments=edf_base_texts(user, document.owner), name=document.name)
    number = (document.versions.select_for_update().aggregate(top=Max("number"))["top"] or 0) + 1
    return EdfVersion.objects.create(
        document=document, number=number, text=text, note=note[:200], created_by=user,
        error_count=sum(f.severity == ERROR for f in result.findings),
        warning_count=sum(f.severity == WARNING for f in result.findings),
    )


@transaction.atomic
def edf_create(user, *, name: str, text: str, description: str = "", note: str = "") -> EdfDocument:
    """A new EDF owned by ``user`` with its first version. Saving an EDF that still has errors is
    allowed (work in progress); the version records how many."""
    edf_name_validator(name)
    if name.endswith(".toml"):
        raise ValidationError({"name": "Leave out '.toml': srun --environment=NAME adds it."})
    _check_text(text)
    if EdfDocument.objects.filter(owner=user, name=name).exists():
        raise ValidationError({"name": f"You already have an EDF named '{name}'."})
    document = EdfDocument.objects.create(owner=user, name=name, description=description[:500])
    _append_version(document, text, note or "created", user)
    return document


@transaction.atomic
def edf_update(user, document: EdfDocument, *, text: str | None = None, description: str | None = None,
               note: str = "") -> EdfVersion | None:
    """Save new text (a new version, unless it is unchanged) and/or a new description."""
    if document.owner_id != user.pk:
        raise PermissionDenied("Only the owner may change this EDF; copy it to your own EDFs instead.")
    document = _locked(document)
    if description is not None:
        document.description = description[:500]
        document.save(update_fields=["description", "modified"])
    if text is None:
        return None
    _check_text(text)
    latest = document.latest
    if latest is not None and latest.text == text:
        return None
    document.save(update_fields=["modified"])
    return _append_version(document, text, note, user)


@transaction.atomic
def edf_share(user, document: EdfDocument, slurm_accounts: list[str]) -> list[str]:
    """Share with exactly these projects; the owner must be a member of each (staff: any)."""
    if document.owner_id != user.pk:
        raise PermissionDenied("Only the owner may share this EDF.")
    _locked(document)  # the caller's instance stays the one changed: its prefetched projects are refreshed by set()
    wanted = set(slurm_accounts)
    projects = Project.objects.filter(slurm_account__in=wanted)
    if not user.is_staff:
        projects = projects.filter(memberships__user=user)
    found = {project.slurm_account for project in projects}
    unknown = sorted(wanted - found)
    if unknown:
        raise ValidationError({"projects": f"You are not a member of: {', '.join(unknown)}."})
    document.shared_with.set(projects)
    return sorted(found)


@transaction.atomic
def edf_restore(user, document: EdfDocument, number: int) -> EdfVersion | None:
    if document.owner_id != user.pk:
        raise PermissionDenied("Only the owner may change this EDF; copy it to your own EDFs instead.")
    document = _locked(document)
    version = document.versions.filter(number=number).first()
    if version is None:
        raise ValidationError({"version": f"There is no version {number}."})
    return edf_update(user, document, text=version.text, note=f"restored version {number}")


@transaction.atomic
def edf_delete(user, document: EdfDocument) -> None:
    if document.owner_id != user.pk:
        raise PermissionDenied("Only the owner may delete this EDF.")
    _locked(document).delete()
