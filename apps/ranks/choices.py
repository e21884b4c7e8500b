"""Choices of the ranks app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class JobLayoutSourceChoices(models.TextChoices):
    SOURCE_SIZES = "sizes", _("parallel sizes (ranks placed by Slurm's block distribution)")
    SOURCE_MAP = "map", _("exact rank map")
    SOURCE_LOG = "log", _("parsed from an uploaded Megatron log")
    SOURCE_DEMO = "demo", _("demo")
