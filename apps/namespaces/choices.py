"""Choices of the namespaces app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models


class ManagedNamespaceStateChoices(models.TextChoices):
    PROVISIONING = "provisioning", "provisioning"
    SYNCING = "syncing", "syncing"
    COMMITTED = "committed", "committed"  # in git; no Argo CD to say whether it was applied
    READY = "ready", "ready"
    DEGRADED = "degraded", "degraded"
    FAILED = "failed", "failed"
    FROZEN = "frozen", "frozen"
    TEARING_DOWN = "tearing_down", "tearing down"
    ARCHIVED = "archived", "archived"


class NamespaceRequestKindChoices(models.TextChoices):
    CREATE = "create", "new namespace"
    CHANGE = "change", "change"
    TEARDOWN = "teardown", "tear down"


class NamespaceRequestStatusChoices(models.TextChoices):
    DRAFT = "draft", "draft"
    WAITING = "waiting_approval", "waiting for approval"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    COMMITTED = "committed", "committed"
    UNCHANGED = "unchanged", "no change"
    SYNCING = "syncing", "syncing"
    READY = "ready", "ready"
    FAILED = "failed", "failed"
