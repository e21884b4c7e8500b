"""Choices of the flightrec app's models."""
from django.db import models


class FlightDumpFormatChoices(models.TextChoices):
    PICKLE = "pickle", "pickle (PyTorch's default)"
    JSON = "json", "JSON (_dump_fr_trace_json)"


class FlightAnalysisStatusChoices(models.TextChoices):
    PENDING = "pending", "waiting for the analysis"
    HANG = "hang", "hang"
    MISMATCH = "mismatch", "mismatch"
    HEALTHY = "healthy", "healthy"
    INCOMPLETE = "incomplete", "incomplete"
    FAILED = "failed", "analysis failed"
