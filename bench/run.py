"""Run every bench/bench_*.py and print one table: name, figure, floor, ratio.

Usage: python bench/run.py [NAME_FILTER]
"""
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    name_filter = argv[1] if len(argv) > 1 else ""
    workdir = Path(tempfile.mkdtemp(prefix="belvedere-bench-"))
    os.environ["BELVEDERE_DATA_DIR"] = str(workdir / "var")
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.embedded"
    for variable in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(variable, None)
    sys.path.insert(0, str(BASE_DIR))

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)

    figures = []
    for path in sorted((BASE_DIR / "bench").glob("bench_*.py")):
        if name_filter and name_filter not in path.stem:
            continue
        module = importlib.import_module(f"bench.{path.stem}")
        started = time.perf_counter()
        figures.extend(module.run(workdir))
        print(f"ran {path.name} in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    print()
    header = f"{'benchmark':<44} {'figure':>10} {'floor':>10} {'ratio':>7}  floor measured / note"
    print(header)
    print("-" * len(header))
    for figure in figures:
        print(f"{figure.name:<44} {_fmt(figure.seconds):>10} {_fmt(figure.floor_seconds):>10} {figure.ratio:>6.1f}x  {figure.floor_name}")
        if figure.note:
            print(f"{'':<44} {'':>10} {'':>10} {'':>7}  {figure.note}")
    return 0


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
