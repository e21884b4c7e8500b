"""Choices of the catalog app's models, named ``<Model><Field>Choices``: models and code compare with these, never with bare strings."""
from django.db import models


class DataProductStateChoices(models.TextChoices):
    FRESH = "fresh", "Fresh"
    AGING = "aging", "Aging"
    STALE = "stale", "Stale"
    UNKNOWN = "unknown", "Unknown"


class CheckRunKindChoices(models.TextChoices):
    FRESHNESS = "freshness", "freshness"
    COVERAGE = "coverage", "coverage"
    GAPS = "gaps", "gaps"
    DRIFT = "drift", "schema drift"


class CheckRunStatusChoices(models.TextChoices):
    PASS = "pass", "pass"
    WARN = "warn", "warn"
    FAIL = "fail", "fail"
    SKIPPED = "skipped", "skipped"
    ERROR = "error", "error"


class IncidentStateChoices(models.TextChoices):
    OPEN = "open", "open"
    ACKNOWLEDGED = "acknowledged", "acknowledged"
    RESOLVED = "resolved", "resolved"
