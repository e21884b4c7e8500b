"""The demo system for tests that only read it: built once per run, restored for each later test.

``manage.py demo`` takes about 35 s in the test profile and some twenty tests need it (browser tests,
pages, the API schema). ``load_demo()`` builds it the first time, then keeps a copy of what it wrote:
the SQLite test database (through SQLite's online backup API) and the folders of the data folder the
demo fills (telemetry store, per-job products, saturation state, the namespaces' git repository).
A later call with the same demo settings restores the copy in about a second.

What a restore cannot give back, it does not pretend to: on another engine (the PostgreSQL profile),
inside a transaction (the ``db`` fixture; SQLite's backup needs autocommit) or with a copy older than
``BELVEDERE_TEST_DEMO_MAX_AGE`` seconds (default 900: the demo's data is relative to the time it was
built, and a page reading a copy from half an hour ago would say its telemetry stopped), it builds
the demo again. Tests of the command itself (reproducibility, ``--reset``) call the command.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

MAX_AGE_SECONDS = float(os.environ.get("BELVEDERE_TEST_DEMO_MAX_AGE", "900"))
# Settings the demo's build reads; a copy is reused only under the same values.
_KEY_PREFIXES = ("DEMO_", "TELEMETRY_", "SATURATION_", "VETTING_", "CATALOG_", "SYSTEM_", "WASTE_", "TRIAGE_",
                 "NOTIFY_", "NAMESPACES_", "JOBS_", "TOPOLOGY_", "TIME_ZONE")

# Settings of those prefixes the build never reads (tests set them before loading the demo).
_KEY_IGNORED = {"VETTING_ACTIONS_DRY_RUN"}

_snapshots: dict[str, tuple[float, Path]] = {}
stats = {"built": 0, "restored": 0}
#: Every build of this run: (the test that asked, why a copy could not serve, seconds). The terminal summary
#: prints it (tests/conftest.py): a build costs half a minute, and the budget is in tests/README.md.
builds: list[tuple[str, str, float]] = []


def _built(reason: str, started: float) -> None:
    stats["built"] += 1
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    builds.append((test, reason, time.perf_counter() - started))


def _folders() -> dict[str, Path]:
    """The folders the demo writes besides the database, by a stable name."""
    from django.conf import settings

    folders = {name: Path(settings.DATA_DIR) / name
               for name in ("telemetry-products", "saturation-products", "saturation-state")}
    folders["gitops"] = Path(settings.NAMESPACES_GIT_PATH)
    for alias, config in settings.TELEMETRY_BACKENDS.items():
        path = (config.get("OPTIONS") or {}).get("path")
        if path:
            folders[f"telemetry-{alias}"] = Path(path)
    return folders


def _key() -> str:
    from django.conf import settings

    values = []
    # dir() of overridden settings lists what a test changed, of plain ones not always all: name it too.
    for name in sorted({*dir(settings), "TELEMETRY_BACKENDS"}):
        if name.isupper() and name.startswith(_KEY_PREFIXES) and name not in _KEY_IGNORED:
            value = getattr(settings, name, None)
            if name == "TELEMETRY_BACKENDS":  # where the store lies differs per test; what it is does not
                value = {alias: config.get("BACKEND") for alias, config in value.items()}
            values.append(f"{name}={value!r}")
    return hashlib.sha256("\n".join(values).encode()).hexdigest()[:16]


def _restorable() -> bool:
    from django.db import connection

    return (connection.vendor == "sqlite" and connection.get_autocommit()
            and not connection.is_in_memory_db())


def _copy_folders(source: dict[str, Path], target: dict[str, Path]) -> None:
    for name, destination in target.items():
        shutil.rmtree(destination, ignore_errors=True)
        if source[name].exists():
            shutil.copytree(source[name], destination, symlinks=True)


def _after_restore() -> None:
    """Forget what this process remembered of the data it replaced."""
    from django.core.cache import cache

    from apps.telemetry.store import reset_telemetry_stores

    reset_telemetry_stores()
    cache.clear()


def load_demo(stdout=None) -> str:
    """Load the demo system into the test database; returns "built", "restored" or "loaded" (it was)."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from apps.core.models import DemoState

    out = stdout if stdout is not None else io.StringIO()
    started = time.perf_counter()
    if not _restorable():
        call_command("demo", stdout=out)
        _built("not restorable here (another engine, or inside a transaction)", started)
        return "built"
    if DemoState.objects.exists():  # already loaded: the command says so and changes nothing
        call_command("demo", stdout=out)
        return "loaded"
    key = _key()
    found = _snapshots.get(key)
    if found and time.monotonic() - found[0] <= MAX_AGE_SECONDS:
        root = found[1]
        connection.ensure_connection()
        with sqlite3.connect(root / "db.sqlite3") as source:
            source.backup(connection.connection)
        _copy_folders({name: root / name for name in _folders()}, _folders())
        _after_restore()
        stats["restored"] += 1
        return "restored"
    call_command("demo", stdout=out)
    _built("no copy yet" if not found else "the copy is older than BELVEDERE_TEST_DEMO_MAX_AGE", started)
    root = Path(settings.DATA_DIR) / "demo-snapshots" / key
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    connection.ensure_connection()
    target = sqlite3.connect(root / "db.sqlite3")
    try:
        connection.connection.backup(target)
    finally:
        target.close()
    _copy_folders(_folders(), {name: root / name for name in _folders()})
    _snapshots[key] = (time.monotonic(), root)
    return "built"


@contextmanager
def demo_for_module():
    """The demo for a module-scoped fixture (call it with the database unblocked): loaded on entry, and on exit the
    database as it was before (migrations' own rows included, which a flush would remove). On SQLite the
    database is copied aside and back; elsewhere the demo is built inside a transaction that is rolled back."""
    from django.core.management import call_command
    from django.db import connection, transaction

    if not _restorable():
        with transaction.atomic():
            started = time.perf_counter()
            call_command("demo", stdout=io.StringIO())
            _built("not restorable here (another engine)", started)
            yield
            transaction.set_rollback(True)
        return
    connection.ensure_connection()
    before = sqlite3.connect(":memory:")
    try:
        connection.connection.backup(before)
        load_demo()
        yield
        connection.ensure_connection()
        before.backup(connection.connection)
        _after_restore()
    finally:
        before.close()
