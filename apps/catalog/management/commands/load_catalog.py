"""``python manage.py load_catalog [FOLDER...] [--check]``: validate the product files and load them."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.catalog.services import catalog_folders, load_catalog


class Command(BaseCommand):
    help = ("Validate the data product files (one YAML per product) and load them; a changed file becomes a new version. "
            "Problems are printed as FILE:LINE:COLUMN: PATH: message.")

    def add_arguments(self, parser):
        parser.add_argument("folders", nargs="*", help="folders of product files (default: the built-in ones and CATALOG_PATHS)")
        parser.add_argument("--check", action="store_true", help="only validate; store nothing")

    def handle(self, *args, folders, check, **options):
        report = load_catalog([Path(folder) for folder in folders] or catalog_folders(), dry_run=check)
        for problem in report.problems:
            self.stderr.write(str(problem))
        if check:
            self.stdout.write(f"{len(report.unchanged)} product file(s) valid, {len(report.problems)} problem(s)")
        else:
            self.stdout.write(f"created {len(report.created)}, updated {len(report.updated)}, unchanged {len(report.unchanged)}"
                              + (f"; {len(report.problems)} problem(s), those files were not loaded" if report.problems else ""))
            for label, names in (("created", report.created), ("updated", report.updated)):
                for name in names:
                    self.stdout.write(f"  {label}: {name}")
        if report.problems:
            raise CommandError(f"{len(report.problems)} problem(s) in the product files")
