"""Shared fixtures.

The suite runs in two profiles with the same tests:

* default (``make test``): SQLite file database, kombu filesystem broker;
* integration (``make test-integration``, run by ``.ci/run``): PostgreSQL and Redis, selected by
  DATABASE_URL and CELERY_BROKER_URL.

Tests marked ``integration`` start a real Celery worker process (:func:`celery_worker_process`).
With BELVEDERE_NO_SKIP=1 (set by ``.ci/run``, or CI=true) a skipped test fails the run: CI must
exercise every path, a laptop without Chromium may skip the browser tests.

``make test`` runs the default profile in parallel (pytest-xdist, ``-n $(TEST_WORKERS)`` with
``--dist loadgroup``). Each xdist worker gets its own data folder (``var/test/run-<pid>``: database
file, filesystem broker, telemetry store, worker logs), so the real Celery worker a test starts
consumes only its own xdist worker's tasks. Tests that share one expensive singleton run on one
worker (:data:`XDIST_GROUPS`): one Chromium and live server, one private Slurm cluster.
``make test PYTEST_ARGS="-n 0"`` runs serially.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
ARTIFACTS_DIR = BASE_DIR / "test-artifacts"


def _no_skip_required() -> bool:
    return os.environ.get("BELVEDERE_NO_SKIP") == "1" or os.environ.get("CI", "").lower() == "true"


def pytest_report_header(config):
    from django.conf import settings

    database = settings.DATABASES["default"]
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    host = database.get("HOST") or "local file"
    return [
        f"belvedere: profile={settings.BELVEDERE_PROFILE} database={database['ENGINE'].rsplit('.', 1)[-1]} ({host}) broker={broker}",
        f"belvedere: skipped tests {'FAIL the run' if _no_skip_required() else 'are allowed'}",
    ]


# Modules whose queries lean on what engines do differently (filters and ordering over accounts
# and states, bulk upserts, row locks, JSON columns, the demo's bulk loads, access selectors).
# Modules that start an installation of their own (make run's embedded stack, the benches' folders): the
# profile's database and broker never reach them, so a second run would only repeat the first (~6 min).
OWN_INSTALLATION_MODULES = {
    "tests/integration/test_run_command.py",
    "tests/bench/test_bench_live_smoke.py", "tests/bench/test_bench_jobpage_smoke.py",
    # make run's own web server (gunicorn from deploy/supervisord.conf) or its supervised worker: in the second CI
    # stream, which had ~11 minutes to spare while the first was the run's length (tests/README.md)
    "tests/security/test_worker_kill.py", "tests/security/test_bounded_input.py", "tests/core/test_compression.py",
}
ENGINE_SENSITIVE_MODULES = {
    "tests/accounts/test_access.py",
    "tests/jobs/test_access.py", "tests/jobs/test_list.py", "tests/jobs/test_events.py",
    "tests/jobs/test_slurm_json_captured.py",
    "tests/vetting/test_services.py", "tests/vetting/test_api.py",
    "tests/namespaces/test_workflow.py", "tests/namespaces/test_access.py",
    "tests/edf/test_documents.py",
    "tests/catalog/test_checks.py",
    "tests/topology/test_import.py",
    "tests/core/test_demo.py",
    "tests/security/test_authz_matrix.py",
}


def engine_sensitive(item) -> bool:
    """Whether a test's outcome can depend on the database engine or the broker: it starts a real
    worker (``integration``), runs in real transactions (``django_db(transaction=True)``: locking,
    commit visibility across processes), or says so itself (``engine``). Browser tests are left to
    the default profile: what they check is the page, not the engine behind it."""
    if item.get_closest_marker("browser"):
        return False
    if item.nodeid.split("::", 1)[0] in OWN_INSTALLATION_MODULES:
        return False
    if item.get_closest_marker("engine_independent"):
        return False
    if item.get_closest_marker("integration") or item.get_closest_marker("engine"):
        return True
    if item.nodeid.split("::", 1)[0] in ENGINE_SENSITIVE_MODULES:
        return True
    marker = item.get_closest_marker("django_db")
    return bool(marker and marker.kwargs.get("transaction"))


# Tests that share a singleton resource (a session fixture that is expensive to start twice) run on
# one xdist worker under ``--dist loadgroup``: group -> (fixtures, markers, modules) that put a test in it.
# The first group that matches wins; an ``xdist_group`` mark on a test wins over them all.
XDIST_GROUPS = {
    # One headless Chromium and one live server for every browser test.
    "chromium": ({"browser", "page"}, {"browser"}, set()),
    # One private Slurm cluster (own munged, slurmctld, slurmd, MariaDB database) for the run.
    "slurm-cluster": ({"slurm_cluster", "slurm_cluster_accounting", "slurmrestd_socket", "slurm_env"}, set(), set()),
    # Whole installations (make run's web, worker and beat; the benches' stacks) one after the other:
    # two at once on a 2-core machine would only race their start-up timeouts.
    "own-installation": (set(), set(), OWN_INSTALLATION_MODULES),
}


def xdist_group_of(item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    for group, (fixtures, markers, modules) in XDIST_GROUPS.items():
        if (fixtures & set(getattr(item, "fixturenames", ())) or any(item.get_closest_marker(m) for m in markers)
                or item.nodeid.split("::", 1)[0] in modules):
            return group
    return None


# pytest-xdist 3.8 marks a test's group by appending "@group" to its node id, which pytest 9.2 (structured node
# ids) ignores, so its loadgroup scheduler would spread every group over the workers. Instead each worker writes
# {node id: group} for its collection to a file named after the controller (its parent process), and the
# controller's scheduler reads it when it hands out the tests (after every worker has collected).
def _groups_files(controller_pid: int, worker: str = "*") -> list[Path] | Path:
    folder = Path(tempfile.gettempdir())
    name = f"belvedere-xdist-groups-{controller_pid}-{worker}.json"
    return folder / name if worker != "*" else sorted(folder.glob(name))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error when xdist is not loaded (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = {}
                for path in _groups_files(os.getpid()):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return GroupScheduling(config, log)


def pytest_configure(config):
    """The xdist controller forgets the data folder portal/settings/test.py chose for it (run-<its pid>),
    so that each worker it starts chooses its own (run-<worker pid>) instead of inheriting it: two workers
    must never share a filesystem broker queue (one's Celery worker would run the other's tasks) nor
    remove each other's folder when they finish."""
    distributing = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    if distributing and os.environ.get("BELVEDERE_DATA_DIR", "").endswith(f"{os.sep}run-{os.getpid()}"):
        del os.environ["BELVEDERE_DATA_DIR"]


_DEMO_MODULES: dict[str, bool] = {}


def reads_the_demo(item) -> bool:
    """Whether the test's module loads the run's demo (tests/demo_snapshot.py: ``load_demo``, ``demo_for_module``)."""
    path = str(getattr(item, "path", "") or item.fspath)
    if path not in _DEMO_MODULES:
        try:
            text = Path(path).read_text()
        except OSError:
            text = ""
        _DEMO_MODULES[path] = "load_demo(" in text or "demo_for_module(" in text
    return _DEMO_MODULES[path]


def django_order(item) -> int:
    """pytest-django's order of a test: 0 in a transaction (``db``), 1 transactional, 2 without a database."""
    from pytest_django.plugin import validate_django_db

    marker = item.get_closest_marker("django_db")
    transactional = bool(marker and any(validate_django_db(marker)[:2]))
    fixtures = getattr(item, "fixturenames", ())
    if transactional or "transactional_db" in fixtures or "live_server" in fixtures:
        return 1
    return 0 if marker or "db" in fixtures else 2


def demo_order(item) -> tuple[int, int]:
    """The demo's readers side by side, so that one build serves them all (a copy is restored only while it is
    younger than BELVEDERE_TEST_DEMO_MAX_AGE, 15 minutes; a build costs half a minute): within pytest-django's
    order, the readers among the ``db`` tests run last and those among the transactional tests first."""
    group = django_order(item)
    reader = reads_the_demo(item)
    return group, (1 if reader else 0) if group == 0 else (0 if reader else 1)


@pytest.hookimpl(trylast=True)  # after pytest-django's own order (db, transactional, the rest), which this keeps
def pytest_collection_modifyitems(config, items):
    """The demo's readers side by side (:func:`demo_order`). Under xdist, each worker tells the controller the group
    of each test that needs a singleton (XDIST_GROUPS).

    ``--engine-subset`` (used by .ci/run for the PostgreSQL + Redis profile) keeps only the tests
    whose result can differ between engines; the default profile runs everything."""
    items.sort(key=demo_order)
    installations = config.getoption("--installations")
    if installations != "all":
        keep = [item for item in items if (item.nodeid.split("::", 1)[0] in OWN_INSTALLATION_MODULES) == (installations == "only")]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep
    groups = {item.nodeid: group for item in items if (group := xdist_group_of(item))}
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        path = _groups_files(os.getppid(), os.environ.get("PYTEST_XDIST_WORKER", "gw"))
        path.with_suffix(".tmp").write_text(json.dumps(groups))
        path.with_suffix(".tmp").replace(path)
    if not config.getoption("--engine-subset"):
        return
    keep = [item for item in items if engine_sensitive(item)]
    dropped = [item for item in items if not engine_sensitive(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_addoption(parser):
    parser.addoption("--engine-subset", action="store_true", default=False,
                     help="run only the tests whose outcome depends on the database engine or the broker")
    parser.addoption("--installations", choices=("all", "skip", "only"), default="all",
                     help="the tests that start a whole installation of their own (OWN_INSTALLATION_MODULES: make run, "
                          "the benches' stacks): run them too (all), leave them out (skip) or run only them (only); "
                          ".ci/run runs them beside the rest")


def pytest_sessionstart(session):
    """In the integration profile, stop at once with one clear line when a service is down."""
    if os.environ.get("BELVEDERE_INTEGRATION") != "1":
        return
    import psycopg
    from django.conf import settings

    database = settings.DATABASES["default"]
    problems = []
    try:
        # The server's maintenance database: the test database does not exist yet.
        psycopg.connect(
            dbname="postgres", user=database.get("USER") or None, password=database.get("PASSWORD") or None,
            host=database.get("HOST") or None, port=database.get("PORT") or None, connect_timeout=3,
        ).close()
    except Exception as exc:
        problems.append(f"PostgreSQL ({os.environ.get('DATABASE_URL')}): {exc}".strip())
    try:
        import redis

        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=3).ping()
    except Exception as exc:
        problems.append(f"Redis ({settings.CELERY_BROKER_URL}): {exc}")
    if problems:
        pytest.exit("integration profile: services unreachable: " + "; ".join(problems) + " (.ci/run starts them)", returncode=3)


def pytest_terminal_summary(terminalreporter):
    """Every demo build of this run, and why no copy could serve (tests/demo_snapshot.py): the budget's largest
    shared cost (tests/README.md)."""
    from tests import demo_snapshot

    if demo_snapshot.builds or demo_snapshot.stats["restored"]:
        terminalreporter.section("demo builds")
        terminalreporter.write_line(f"{len(demo_snapshot.builds)} built ({sum(s for _, _, s in demo_snapshot.builds):.0f} s), "
                                    f"{demo_snapshot.stats['restored']} restored from a copy")
        for test, reason, seconds in demo_snapshot.builds:
            terminalreporter.write_line(f"  {seconds:5.0f} s  {test}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    from django.conf import settings

    if not hasattr(session.config, "workerinput"):
        for path in _groups_files(os.getpid()):
            path.unlink(missing_ok=True)
    from django.core.exceptions import ImproperlyConfigured

    # This run's database file and broker queue (see portal/settings/test.py); absent when pytest
    # runs without Django (-p no:django) for the plain modules.
    try:
        data_dir = settings.DATA_DIR
    except ImproperlyConfigured:
        data_dir = None
    if data_dir is not None and data_dir.name.startswith("run-"):
        shutil.rmtree(data_dir, ignore_errors=True)
    if not _no_skip_required():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.write_line(f"BELVEDERE_NO_SKIP: {len(skipped)} test(s) skipped; every test must run here:", red=True)
        for report in skipped:
            reporter.write_line(f"  {report.nodeid}: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr}")
        session.exitstatus = 1


# ---------------------------------------------------------------------------------------------
# People
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def make_user(django_user_model):
    def make(username: str, *, password: str = "pw-for-tests-1", is_staff: bool = False, accounts=()):
        from apps.accounts.models import Membership, Project

        user = django_user_model.objects.create_user(username=username, password=password, is_staff=is_staff)
        for account in accounts:
            project, _ = Project.objects.get_or_create(slurm_account=account, defaults={"title": f"Project {account}"})
            Membership.objects.create(user=user, project=project)
        return user

    return make


@pytest.fixture(autouse=True)
def _default_cache_emptied_after_each_test(request):
    """The default cache holds what production holds (the job page's fragments for JOB_PAGE_CACHE_SECONDS,
    throttle counters): each test leaves it empty, since a rolled-back test's row ids come back in the next."""
    yield
    if "django_db_setup" in request.fixturenames:
        from django.core.cache import cache

        cache.clear()


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


# ---------------------------------------------------------------------------------------------
# A real Celery worker process
# ---------------------------------------------------------------------------------------------
def database_url(settings_dict: dict) -> str:
    """DATABASE_URL that points a subprocess at the database this test session uses."""
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    if engine.endswith("postgresql"):
        user = quote(settings_dict.get("USER") or "")
        password = f":{quote(settings_dict['PASSWORD'])}" if settings_dict.get("PASSWORD") else ""
        credentials = f"{user}{password}@" if user else ""
        host = settings_dict.get("HOST") or ""
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgres://{credentials}{host}{port}/{settings_dict['NAME']}"
    raise RuntimeError(f"no DATABASE_URL form known for {engine}")


def _purge_broker() -> None:
    from django.conf import settings

    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        for folder in ("queue", "control"):
            shutil.rmtree(settings.BROKER_DIR / folder, ignore_errors=True)
            (settings.BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
    else:
        from portal.celery import app

        app.control.purge()


class ServiceProcess:
    """A subprocess of the portal (worker, beat) whose log is kept for failure messages."""

    def __init__(self, name: str, args: list[str], env: dict, ready_marker: str | None, timeout: float = 90):
        ARTIFACTS_DIR.mkdir(exist_ok=True)
        self.name = name
        # One log per xdist worker and profile: two workers' Celery workers must not write one file, nor the two
        # profiles' (.ci/run runs them side by side).
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        profile = "-integration" if os.environ.get("BELVEDERE_INTEGRATION") == "1" else ""
        self.log_path = ARTIFACTS_DIR / (f"{name}{profile}-{worker}.log" if worker else f"{name}{profile}.log")
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(args, cwd=BASE_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        if ready_marker:
            self._wait_for(ready_marker, timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _wait_for(self, marker: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.log_text():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready; its log ends with:\n{self.log_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def service_environment(**extra) -> dict:
    from django.db import connection

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.test",
        DATABASE_URL=database_url(connection.settings_dict),
        PYTHONUNBUFFERED="1",
        C_FORCE_ROOT="1",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """One real worker process for the session, consuming the configured broker."""
    with django_db_blocker.unblock():
        _purge_broker()
        env = service_environment()
    worker = ServiceProcess(
        "celery-worker",
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--without-mingle",
         "--without-gossip", "--loglevel=INFO", f"--hostname=test-{uuid.uuid4().hex[:8]}@%h"],
        env,
        ready_marker=" ready.",
    )
    yield worker
    worker.stop()


@pytest.fixture
def start_service():
    """Start extra portal processes (e.g. beat) for one test; they are stopped afterwards."""
    started: list[ServiceProcess] = []

    def start(name: str, args: list[str], ready_marker: str | None = None, **extra_env) -> ServiceProcess:
        service = ServiceProcess(name, [sys.executable, *args], service_environment(**extra_env), ready_marker)
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def store_kept(settings, tmp_path):
    """``store_kept(raw_days, m1_days, m10_days)``: a fresh embedded telemetry store as the portal's default, keeping its
    tiers for those days (not the test profile's century), returned; forgotten after the test."""
    import copy

    from apps.telemetry.store import reset_telemetry_stores, telemetry_store

    def make(raw_days: float, m1_days: float, m10_days: float):
        backends = copy.deepcopy(settings.TELEMETRY_BACKENDS)
        backends["default"]["BACKEND"] = "apps.telemetry.backends.embedded.EmbeddedBackend"
        backends["default"]["OPTIONS"].update(path=str(tmp_path / "telemetry"),
                                              retention={"raw_days": raw_days, "m1_days": m1_days, "m10_days": m10_days})
        settings.TELEMETRY_BACKENDS = backends
        reset_telemetry_stores()
        return telemetry_store()

    yield make
    reset_telemetry_stores()


@pytest.fixture
def store(settings, tmp_path):
    """A fresh embedded telemetry store for one test, configured as the portal's default."""
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store

    # A century for every tier: tests write samples at fixed dates, which must not age past a horizon as the calendar
    # moves on; the tiers' tests set ``store.retention`` and ``store.clock`` themselves.
    century = {"raw_days": 36500, "m1_days": 36500, "m10_days": 36500}
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(tmp_path / "telemetry"), "retention": century}}}
    reset_telemetry_stores()
    yield telemetry_store()
    reset_telemetry_stores()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole run (Playwright's sync API holds an event loop in this thread, so
    every test that drives a browser shares this one instead of starting its own)."""
    import shutil
    from pathlib import Path

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
