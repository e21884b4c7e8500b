"""Test profile: the embedded profile with fast hashing and per-run data under var/test.

The integration profile uses the same module with DATABASE_URL pointing at PostgreSQL and
CELERY_BROKER_URL at Redis (see .ci/run and the Makefile's test-integration target).
"""
import os

# One data folder per test run (set in the environment, so the worker and beat processes the
# tests start share it): two runs on one machine never share a database file or a broker queue.
os.environ.setdefault(
    "BELVEDERE_DATA_DIR", str(__import__("pathlib").Path(__file__).resolve().parents[2] / "var" / "test" / f"run-{os.getpid()}")
)

from .embedded import *  # noqa: E402,F401,F403
from .embedded import DATA_DIR, DATABASES  # noqa: E402

BELVEDERE_PROFILE = "test"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# A file, not ":memory:", so a real worker process and the live server see the same database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}
READYZ_CACHE_SECONDS = 0.0
# The job page's fragments are cached as in production (issue 33: a cache the tests turned off hid a leak between
# users); tests/conftest.py empties the default cache after each test, whose rows' ids repeat after a rollback.
JOB_PAGE_CACHE_SECONDS = 15
# The demo's synthetic telemetry is tested on its own; the many tests that build the demo need less.
DEMO_TELEMETRY_HOURS = float(os.environ.get("DEMO_TELEMETRY_HOURS", "0.25"))
DEMO_FLEET_HOURS = float(os.environ.get("DEMO_FLEET_HOURS", "1.0"))
READYZ_BROKER_TIMEOUT = 20.0
# Many tests write samples at fixed dates (2026-01 to 2026-11) that age past the default 30-day raw horizon as the
# calendar moves on; the test profile keeps every tier for a century unless a test (or the environment) says
# otherwise. The tiers' own tests set their retention and clock explicitly (tests/telemetry/contract.py).
_CENTURY = float(os.environ.get("TELEMETRY_RETENTION_TEST_DAYS", "36500"))
TELEMETRY_BACKENDS["default"]["OPTIONS"]["retention"] = {"raw_days": _CENTURY, "m1_days": _CENTURY, "m10_days": _CENTURY}  # noqa: F405
