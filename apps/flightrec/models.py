"""A job's Flight Recorder dumps (one file per rank, kept under FLIGHTREC_DIR) and their analysis."""
from django.db import models

from apps.core.models import TimeStampedModel

from .choices import FlightAnalysisStatusChoices, FlightDumpFormatChoices


class FlightDump(TimeStampedModel):
    """One rank's dump as it was posted (the file, checked and bounded), to be analysed with its peers'."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="flight_dumps")
    rank = models.PositiveIntegerField()
    format = models.CharField(max_length=10, choices=FlightDumpFormatChoices.choices)
    size = models.PositiveBigIntegerField()
    entries = models.PositiveIntegerField()
    path = models.CharField(max_length=500, help_text="relative to FLIGHTREC_DIR")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "rank"], name="flightrec_dump_one_per_rank")]
        ordering = ["job", "rank"]

    def __str__(self) -> str:
        return f"{self.job_id} rank {self.rank}"


class FlightAnalysis(TimeStampedModel):
    """The job's analysis (``analysis.Analyser.result()``) as of ``dumps`` dumps; redone when more arrive."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="flight_analysis")
    status = models.CharField(max_length=12, choices=FlightAnalysisStatusChoices.choices,
                              default=FlightAnalysisStatusChoices.PENDING)
    dumps = models.PositiveIntegerField(default=0, help_text="dumps the body was computed from")
    body = models.JSONField(default=dict, blank=True)
    message = models.CharField(max_length=500, blank=True)
    computed = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.job_id}: {self.status}"
