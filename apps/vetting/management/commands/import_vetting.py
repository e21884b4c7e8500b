"""python manage.py import_vetting FILE... — store vetnode output, dcgmi diag JSON or run documents."""
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.vetting.parsers import FORMATS, parse
from apps.vetting.records import ParseError


class Command(BaseCommand):
    help = ("Import vetting results: vetnode's output (current or the older Vetted:/Cordon: format), `dcgmi diag -j` JSON "
            "(give --host) or a run document as POST /api/v1/vetting/runs/ takes it. Problems are printed as "
            "FILE:LINE:COLUMN: message and nothing of that file is stored.")

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")
        parser.add_argument("--format", choices=FORMATS, default="auto")
        parser.add_argument("--cluster", default=settings.SLURM_CLUSTER_NAME)
        parser.add_argument("--job", type=int, help="the Slurm job the vetting ran in")
        parser.add_argument("--host", help="the node a dcgmi diag ran on")
        parser.add_argument("--protocol", default="", help="the vetnode protocol's name")

    def handle(self, *args, files, format, cluster, job, host, protocol, **options):
        from apps.jobs.models import Cluster, Job
        from apps.vetting.services import run_store

        cluster_row, _ = Cluster.objects.get_or_create(name=cluster)
        job_row = Job.objects.filter(cluster=cluster_row, job_id=job).first() if job else None
        failed = 0
        for name in files:
            path = Path(name)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self.stderr.write(f"{name}: cannot read: {exc}")
                failed += 1
                continue
            try:
                run = parse(text, format, host=host)
            except ParseError as exc:
                for line, column, message in exc.problems:
                    self.stderr.write(f"{name}:{line or 0}:{column or 0}: {message}")
                failed += 1
                continue
            run.protocol_name = protocol or run.protocol_name
            run.job_id = job or run.job_id
            stored = run_store(run, cluster=cluster_row, job=job_row, submitter="import_vetting")
            bad = f"; failed: {', '.join(run.failed_hosts)}" if run.failed_hosts else ""
            self.stdout.write(f"{name}: run {stored.pk} ({run.source}), {len(run.results)} results on {len(run.hosts)} nodes{bad}")
            for warning in run.warnings:
                self.stdout.write(f"{name}: note: {warning}")
        if failed:
            raise CommandError(f"{failed} of {len(files)} files were not imported")
