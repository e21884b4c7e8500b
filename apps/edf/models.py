"""Saved EDFs: a named document per owner with an append-only history of versions.

An :class:`EdfDocument` is what ``srun --environment=NAME`` would find in ``${HOME}/.edf``: one
name per owner. Every save appends an :class:`EdfVersion` (never edits one), so a version can be
compared with, downloaded, or restored. Sharing with a project (Slurm account) lets its members
read and copy the document; only the owner edits it.
"""
from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TimeStampedModel

edf_name_validator = RegexValidator(
    r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z",  # \Z: "$" would accept a trailing newline
    _("An EDF name as srun --environment=NAME reads it: letters, digits, '_', '.', '-', at most 64 characters, "
      "no '.toml'."),
)


class EdfDocument(TimeStampedModel):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="edf_documents")
    name = models.CharField(max_length=64, validators=[edf_name_validator],
                            help_text=_("The name srun --environment=NAME finds in ${HOME}/.edf."))
    description = models.CharField(max_length=500, blank=True)
    shared_with = models.ManyToManyField("accounts.Project", blank=True, related_name="edf_documents",
                                         help_text=_("Projects whose members may read and copy this EDF."))

    class Meta:
        ordering = ["owner__username", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="edf_document_owner_name_unique")]

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def latest(self) -> "EdfVersion | None":
        prefetched = getattr(self, "_prefetched_objects_cache", {}).get("versions")  # a list prefetched them: no query per row
        if prefetched is not None:
            return max(prefetched, key=lambda version: version.number, default=None)
        return self.versions.order_by("-number").first()


class EdfVersion(models.Model):
    document = models.ForeignKey(EdfDocument, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    note = models.CharField(max_length=200, blank=True, help_text=_("What changed, like a commit message."))
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    error_count = models.PositiveIntegerField(default=0)
    warning_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["document", "-number"]
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="edf_version_number_unique")]

    def __str__(self) -> str:
        return f"{self.document} v{self.number}"
