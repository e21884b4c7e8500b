"""Choices of the campaigns app's models, named ``<Model><Field>Choices``."""
from django.db import models
from django.utils.translation import gettext_lazy as _


class CampaignSourceChoices(models.TextChoices):
    COMMENT = "comment", _("the jobs' --comment or their metrics client names the run")
    SINGLETON = "singleton", _("a chain of jobs with --dependency=singleton")
    REQUEUE = "requeue", _("one job that Slurm requeued")
    MANUAL = "manual", _("put together by its owner")
    DEMO = "demo", _("demo")
