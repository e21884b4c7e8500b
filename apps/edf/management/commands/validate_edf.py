"""python manage.py validate_edf FILE... — check EDFs like a compiler; usable as a pre-commit hook.

Prints ``file:line:col: severity: message [rule]`` (and the hint on the next line), exits 1 when
any file has an error, 0 otherwise (warnings do not fail).
"""
import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.edf.validator import validate


class Command(BaseCommand):
    help = "Validate EDF files; exit status 1 if any has an error."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="EDF (.toml) files")
        parser.add_argument("--search-path", default=os.environ.get("EDF_PATH", ""),
                            help="colon-separated folders where base_environment names are looked up (default $EDF_PATH, "
                                 "then each file's own folder)")
        parser.add_argument("--quiet", action="store_true", help="print errors only")

    def handle(self, *args, files, search_path, quiet, **options):
        failed = False
        for name in files:
            path = Path(name)
            if not path.is_file():
                raise CommandError(f"{name}: no such file")
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                self.stdout.write(f"{name}:1:1: error: not UTF-8 text (byte {exc.start}) [encoding]")
                failed = True
                continue
            folders = [Path(folder) for folder in search_path.split(":") if folder] + [path.parent]
            bases = {}
            for folder in folders:
                for candidate in sorted(folder.glob("*.toml")):
                    if candidate.resolve() != path.resolve():
                        bases.setdefault(candidate.stem, candidate.read_text(encoding="utf-8", errors="replace"))
            result = validate(text, base_environments=bases)
            for finding in result.findings:
                if quiet and finding.severity != "error":
                    continue
                self.stdout.write(f"{name}:{finding.line}:{finding.column}: {finding.severity}: {finding.message} [{finding.rule}]")
                if finding.hint and not quiet:
                    self.stdout.write(f"    hint: {finding.hint}")
            failed = failed or not result.valid
        if failed:
            raise SystemExit(1)
