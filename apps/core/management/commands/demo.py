"""Build the demo system: ``python manage.py demo [--reset] [--seed N]``."""
import random
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.core.demo import DEFAULT_SEED, DemoContext, registered_parts
from apps.core.demo_progress import ProgressFile
from apps.core.demo_logins import demo_logins
from apps.core.models import DemoState


class Command(BaseCommand):
    help = "Build a reproducible synthetic instance of the reference system (embedded profile only)."

    def add_arguments(self, parser):
        parser.add_argument("--reset", action="store_true", help="remove the demo system and build it again")
        parser.add_argument("--seed", type=int, default=None, help=f"random seed (default {DEFAULT_SEED}, or the loaded one with --reset)")

    def handle(self, *args, reset: bool, seed: int | None, **options):
        if settings.BELVEDERE_PROFILE == "production":
            raise CommandError("the demo system creates users with published passwords; it is for the embedded profile only")
        state = DemoState.objects.first()
        if state and not reset:
            self.stdout.write(f"Demo system already loaded (seed {state.seed}, built {state.built:%Y-%m-%d %H:%M} UTC); --reset rebuilds it.")
            self._print_logins()
            return
        if seed is None:
            seed = state.seed if state else DEFAULT_SEED
        parts = registered_parts()
        # The pages served beside the build read this file (the transaction below hides everything until it ends).
        progress = ProgressFile(settings.DEMO_PROGRESS_FILE, parts={part.name: part.weight for part in parts}, seed=seed)
        started = time.perf_counter()
        try:
            with transaction.atomic():
                # Reset in reverse build order so later parts release what they hold on earlier ones.
                progress.start("reset")
                for part in reversed(parts):
                    part.reset()
                DemoState.objects.all().delete()
                context = DemoContext(seed=seed, rng=random.Random(seed), out=self.stdout)
                for part in parts:
                    progress.start(part.name)
                    part_started = time.perf_counter()
                    summary = part.build(context)
                    seconds = time.perf_counter() - part_started
                    details = ", ".join(f"{value} {key}" for key, value in summary.items())
                    self.stdout.write(f"  {part.name:<12} {details} ({seconds:.2f} s)")
                    progress.finish(part.name, seconds)
                progress.start("saving")
                DemoState.objects.create(seed=seed, parts=[part.name for part in parts])
        except BaseException as error:
            progress.failed(error)
            raise
        progress.ready()
        self.stdout.write(self.style.SUCCESS(f"Demo system built with seed {seed} in {time.perf_counter() - started:.2f} s."))
        self._print_logins()

    def _print_logins(self):
        self.stdout.write("Log in with:")
        for login in demo_logins():
            self.stdout.write(f"  {login.role:<10} user {login.username!r:<10} password {login.password!r}")
