"""``manage.py telemetry_retention [--dry-run]``: the retention pass over the telemetry store, or what it would do."""
from django.core.management.base import BaseCommand, CommandError

from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.services import expire_telemetry
from apps.telemetry.store import telemetry_store


class Command(BaseCommand):
    help = ("Remove the telemetry store's day partitions (embedded) or daily indices (Elasticsearch) that lie wholly "
            "past their tier's retention (TELEMETRY_RETENTION_*_DAYS); --dry-run prints what would go.")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="print what would go, remove nothing")

    def handle(self, *args, dry_run=False, **options):
        try:
            store = telemetry_store()
            self.stdout.write(f"{store.name}: kept {store.retention.describe()}")
            for tier in ("raw", "1m", "10m"):
                self.stdout.write(f"  {tier:<4} answers from {store.retention.horizon(tier, store.now()):%Y-%m-%d %H:%M} UTC")
            items = expire_telemetry(dry_run=dry_run, report=self._progress if not dry_run else _silent)
        except TelemetryUnavailable as exc:
            raise CommandError(str(exc)) from exc
        if not items:
            self.stdout.write("nothing is past its retention")
            return
        self.stdout.write(("would remove" if dry_run else "removed") + f" {len(items)} partition(s):")
        for item in items:
            self.stdout.write("  " + item.line())
        rows = sum(item.rows or 0 for item in items)
        self.stdout.write(f"{rows:,} rows in all" + (" (nothing was removed: --dry-run)" if dry_run else ""))

    def _progress(self, done, message="", total=None):
        if message and done:
            self.stderr.write(f"[{done}/{total}] {message}")


def _silent(*args, **kwargs):
    pass
