"""Choices of the accounts app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class MembershipRoleChoices(models.TextChoices):
    ROLE_MEMBER = "member", _("Member")
    ROLE_MANAGER = "manager", _("Manager")
