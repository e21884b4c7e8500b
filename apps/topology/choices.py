"""Choices of the topology app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class NodeStateChoices(models.TextChoices):
    STATE_UNKNOWN = "unknown", _("Unknown")
    STATE_IDLE = "idle", _("Idle")
    STATE_ALLOCATED = "allocated", _("Allocated")
    STATE_DRAIN = "drain", _("Drained")
    STATE_DOWN = "down", _("Down")
