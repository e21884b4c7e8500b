"""Celery tasks of the campaigns app: stable names, idempotent."""
from celery import shared_task

from apps.core.tasks import IDEMPOTENT

from .services import campaigns_detect


@shared_task(name="campaigns.detect", **IDEMPOTENT)  # redelivered if its worker dies: running it twice adds nothing
def detect_campaigns(cluster_pk: int | None = None) -> dict:
    """Find campaigns among the jobs Slurm recorded (beat, after the syncs); running it twice adds nothing."""
    from apps.jobs.models import Cluster

    cluster = Cluster.objects.filter(pk=cluster_pk).first() if cluster_pk is not None else None
    return campaigns_detect(cluster).as_dict()
