"""The Megatron-LM layout a job reported: parallel sizes, and optionally its exact rank map."""
from django.db import models

from apps.core.models import TimeStampedModel

from .choices import JobLayoutSourceChoices


class JobLayout(TimeStampedModel):
    """One layout per job; posting again replaces it.

    ``rank_map`` is null when only sizes are known (then rank r runs on node r // tasks_per_node
    of the job's node list, local rank r % tasks_per_node), or a list indexed by rank of
    ``[host, local_rank]``.
    """

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="layout")
    tp = models.PositiveIntegerField()
    pp = models.PositiveIntegerField()
    cp = models.PositiveIntegerField(default=1)
    ep = models.PositiveIntegerField(default=1)
    etp = models.PositiveIntegerField(null=True, blank=True)
    dp = models.PositiveIntegerField()
    vpp = models.PositiveIntegerField(null=True, blank=True)
    order = models.CharField(max_length=40, default="tp-cp-ep-dp-pp")
    num_layers = models.PositiveIntegerField(null=True, blank=True)
    first_stage_layers = models.PositiveIntegerField(null=True, blank=True)
    last_stage_layers = models.PositiveIntegerField(null=True, blank=True)
    world_size = models.PositiveIntegerField()
    tasks_per_node = models.PositiveIntegerField(default=4)
    rank_map = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=10, choices=JobLayoutSourceChoices.choices)
    submitted_by = models.CharField(max_length=150, blank=True)
    warnings = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"layout of {self.job}: tp{self.tp} pp{self.pp} dp{self.dp} cp{self.cp} ep{self.ep}"
