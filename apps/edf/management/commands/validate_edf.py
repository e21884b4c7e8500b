"""python manage.py validate_edf FILE... — the EDF checker of apps.edf.cli as a management command."""
import os

from django.core.management.base import BaseCommand, CommandError

from apps.edf.cli import check_files


class Command(BaseCommand):
    help = "Validate EDF files like a compiler (file:line:col: severity: message); exit status 1 if any has an error."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="EDF (.toml) files")
        parser.add_argument("--search-path", default=os.environ.get("EDF_PATH", ""),
                            help="colon-separated folders where base_environment names are looked up (default $EDF_PATH, "
                                 "then each file's own folder)")
        parser.add_argument("--quiet", action="store_true", help="print errors only")

    def handle(self, *args, files, search_path, quiet, **options):
        missing = [name for name in files if not os.path.isfile(name)]
        if missing:
            raise CommandError(f"{missing[0]}: no such file")
        if check_files(files, search_path=search_path, quiet=quiet, out=self.stdout):
            raise SystemExit(1)
