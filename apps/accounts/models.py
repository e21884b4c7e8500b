"""Projects: who may see what.

A :class:`Project` is one Slurm account (``--account``). A user sees the jobs, EDFs and
namespaces of every project they are a member of; staff (``User.is_staff``) see everything.
"""
from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TimeStampedModel

from .choices import MembershipRoleChoices

slurm_account_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    _("A Slurm account name: letters, digits, '_', '.', '-', at most 64 characters."),
)


class Project(TimeStampedModel):
    """A project team and the Slurm account its jobs are charged to."""

    slurm_account = models.CharField(max_length=64, unique=True, validators=[slurm_account_validator])
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="accounts.Membership", related_name="projects")

    class Meta:
        ordering = ["slurm_account"]

    def __str__(self) -> str:
        return f"{self.slurm_account} - {self.title}"


class Membership(TimeStampedModel):
    """A user's place in a project. Managers may later approve namespace and EDF sharing changes."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=MembershipRoleChoices.choices, default=MembershipRoleChoices.ROLE_MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="accounts_membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project.slurm_account} ({self.role})"
