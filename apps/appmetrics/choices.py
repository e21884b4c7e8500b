"""Choices of the appmetrics app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models


class JobModelConfigSourceChoices(models.TextChoices):
    API = "api", "set through the API"
    MEGATRON_LOG = "megatron-log", "read from the Megatron-LM argument dump"
    TENSORBOARD = "tensorboard", "read from TensorBoard hyper-parameters"
    DEMO = "demo", "demo"


class JobReportStatusChoices(models.TextChoices):
    WAITING = "waiting", "waiting for a worker"
    BUILDING = "building", "being built"
    READY = "ready", "ready"
    FAILED = "failed", "failed"
