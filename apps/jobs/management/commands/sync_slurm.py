"""python manage.py sync_slurm --cluster NAME: one sync (Slurm commands on PATH, or the cluster's slurmrestd)."""
from django.core.management.base import BaseCommand

from apps.jobs.models import Cluster
from apps.jobs.services import cluster_sync


class Command(BaseCommand):
    help = ("Read squeue --json and sacct --json (or slurmrestd's /slurm and /slurmdb jobs, for a cluster in "
            "slurmrestd mode) once and store the jobs of CLUSTER.")

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True, help="the cluster's name in Belvedere (created if new)")
        parser.add_argument("--since-hours", type=int, default=None, help="how far back to ask sacct (default SLURM_SACCT_LOOKBACK_HOURS)")

    def handle(self, *args, cluster: str, since_hours: int | None, **options):
        record, created = Cluster.objects.get_or_create(name=cluster)
        if created:
            self.stdout.write(f"New cluster {cluster!r} registered.")
        counts = cluster_sync(record, since_hours=since_hours)
        record.refresh_from_db()
        for source, numbers in counts.items():
            written = f" ({numbers['format']})" if numbers.get("format") else ""
            self.stdout.write(f"  {source}{written}: {numbers['jobs']} jobs read, {numbers['created']} created, "
                              f"{numbers['updated']} updated, {numbers['unchanged']} unchanged"
                              + (f", {numbers['problems']} could not be read" if numbers.get("problems") else ""))
        for line in record.last_sync_message.splitlines():
            self.stderr.write(f"  {line}")
        if record.last_sync_ok:
            self.stdout.write(self.style.SUCCESS(f"Cluster {cluster} synced."))
        else:
            self.stderr.write(self.style.ERROR(f"Cluster {cluster}: sync incomplete (see the messages above)."))
            raise SystemExit(1)
