"""Celery tasks of the jobs app: periodic Slurm syncs."""
from celery import shared_task

from apps.core.models import TaskRun
from apps.core.tasks import IDEMPOTENT

from .choices import ClusterSyncModeChoices
from .models import Cluster
from .services import cluster_sync


@shared_task(name="jobs.sync_cluster", **IDEMPOTENT)
def sync_cluster_task(cluster_id: int) -> dict:
    """Sync one cluster; the outcome is kept on the cluster and as a TaskRun for the staff page."""
    cluster = Cluster.objects.get(pk=cluster_id)
    run = TaskRun.objects.create(name="jobs.sync_cluster", subject=f"cluster {cluster.name}")
    run.start(f"syncing {cluster.name}")
    counts = cluster_sync(cluster)
    cluster.refresh_from_db()
    run.finish(error="" if cluster.last_sync_ok else cluster.last_sync_message.splitlines()[0][:400])
    return counts


@shared_task(name="jobs.sync_clusters", **IDEMPOTENT)
def sync_clusters_task() -> list[int]:
    """Fan out one sync per enabled cluster that Belvedere reads (Slurm commands or slurmrestd)."""
    ids = list(Cluster.objects.filter(sync_enabled=True).exclude(sync_mode=ClusterSyncModeChoices.MODE_PUSH).values_list("pk", flat=True))
    for cluster_id in ids:
        sync_cluster_task.delay(cluster_id)
    return ids
