"""python manage.py import_topology FILE | --preset alps [--dry-run]"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.topology.formats import TopologyFormatError, nodes_from_discovery, parse_discovery_csv, parse_topology_json
from apps.topology.generator import PRESETS, generate
from apps.topology.model import Topology
from apps.topology.services import topology_apply

MAX_FILE_BYTES = 200 * 1024 * 1024


class DryRun(Exception):
    """Raised inside the transaction to roll back a dry run after computing its report."""


class Command(BaseCommand):
    help = (
        "Import the system topology from a belvedere-topology/1 JSON file (replaces the stored system) "
        "or a discovery CSV hostname,xname,nic,mac (adds or updates those nodes), or generate a preset."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", help="a .json topology or a .csv of discovery records")
        parser.add_argument("--preset", choices=sorted(PRESETS), help="generate a synthetic system instead of reading a file")
        parser.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")

    def handle(self, *args, file=None, preset=None, dry_run=False, **options):
        if bool(file) == bool(preset):
            raise CommandError("give either FILE or --preset NAME")
        if preset:
            topology, prune, source = generate(PRESETS[preset]), True, f"preset {preset}"
        else:
            topology, prune = self._read(Path(file))
            source = f"file {Path(file).name}"
        try:
            with transaction.atomic():
                report, revision = topology_apply(topology, source=source, prune=prune)
                if dry_run:
                    raise DryRun
        except DryRun:
            self.stdout.write("Dry run, nothing was changed. The import would make these changes:")
            revision = None
        for line in report.lines():
            self.stdout.write(f"  {line}")
        for example in report.examples[:10]:
            self.stdout.write(f"    - {example}")
        if revision:
            counts = topology.counts() if prune else {"nodes": len(topology.nodes)}
            self.stdout.write(self.style.SUCCESS(
                f"Topology revision {revision.pk}: " + ", ".join(f"{value} {key}" for key, value in counts.items())
            ))

    def _read(self, path: Path) -> tuple[Topology, bool]:
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CommandError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB; split it or use the discovery API")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            if path.suffix.lower() == ".csv":
                nodes = nodes_from_discovery(parse_discovery_csv(text))
                return Topology("discovery", nodes, [], []), False
            return parse_topology_json(text), True
        except TopologyFormatError as exc:
            for problem in exc.problems:
                self.stderr.write(f"{path}:{problem.line or '-'}: {problem.field + ': ' if problem.field else ''}{problem.message}")
            raise CommandError(f"{path}: {len(exc.problems)} problem(s); nothing was imported") from None
