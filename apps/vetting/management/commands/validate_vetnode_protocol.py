"""python manage.py validate_vetnode_protocol FILE... — check vetnode protocols; exit 1 on errors."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.vetting.protocol import validate_protocol


class Command(BaseCommand):
    help = "Check vetnode protocol files (config.yaml) and print FILE:LINE:COLUMN: severity: message; exits 1 on any error."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")

    def handle(self, *args, files, **options):
        errors = 0
        for name in files:
            try:
                text = Path(name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self.stderr.write(f"{name}:0:0: error: cannot read: {exc}")
                errors += 1
                continue
            report = validate_protocol(text)
            for finding in report.findings:
                hint = f" ({finding.hint})" if finding.hint else ""
                self.stdout.write(f"{name}:{finding.line}:{finding.column}: {finding.severity}: {finding.message}{hint}")
            errors += sum(1 for finding in report.findings if finding.severity == "error")
        if errors:
            raise CommandError(f"{errors} error(s)")
