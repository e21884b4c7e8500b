"""The saturation app's node-finding source (``apps.core.node_findings``): the hardware faults (``faults.node_faults``)
in the straggler findings of running jobs' ready saturation records, one row per job that saw each. Node health
(vetting) and the staff triage inbox read them through the registry. Registered from ``SaturationConfig.ready()``."""
from __future__ import annotations

from datetime import datetime

from django.urls import reverse

from apps.core.node_findings import NodeFinding, NodeFindingSource, register_node_finding_source
from apps.jobs.choices import JobStateChoices

from .choices import JobSaturationStatusChoices
from .faults import node_faults
from .models import JobSaturation

SOURCE_KEY = "saturation"


def running_job_faults(now: datetime) -> list[NodeFinding]:
    records = (JobSaturation.objects.filter(job__state=JobStateChoices.RUNNING, status=JobSaturationStatusChoices.STATUS_READY)
               .select_related("job", "job__cluster").defer("per_gpu"))
    found = []
    for record in records:
        if not record.stragglers:
            continue
        job = record.job
        label = f"{job.cluster.name}/{job.display_id}"
        url = reverse("jobs:detail", args=[job.cluster.name, job.job_id])
        for fault in node_faults(record.stragglers or []):
            found.append(NodeFinding(host=fault["host"], kind=fault["kind"], severity=fault["severity"], what=fault["what"],
                                     job=label, job_url=url, since=fault["since"] or job.start_time))
    return found


def register() -> None:
    register_node_finding_source(NodeFindingSource(key=SOURCE_KEY, findings=running_job_faults, order=10))
