"""The production profile refuses to start without its required settings, in one clear line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
COMPLETE = {
    "DJANGO_SETTINGS_MODULE": "portal.settings.production",
    "SECRET_KEY": "x" * 60,
    "DATABASE_URL": "postgres://belvedere@127.0.0.1:5432/belvedere",
    "ALLOWED_HOSTS": "belvedere.example.org",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "ELASTICSEARCH_URL": "https://es.example.org:9200",
}


def run(args: list[str], drop: tuple[str, ...] = (), timeout: float = 60, **extra) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in COMPLETE and not key.startswith("BELVEDERE_")}
    env.update({key: value for key, value in COMPLETE.items() if key not in drop})
    env.update(extra)
    return subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("missing", [("SECRET_KEY",), ("DATABASE_URL",), ("SECRET_KEY", "DATABASE_URL"), ("ALLOWED_HOSTS",), ("CELERY_BROKER_URL",)])
def test_manage_py_refuses_to_start_and_names_what_is_missing(missing):
    result = run(["manage.py", "check"], drop=missing)
    assert result.returncode == 78, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Belvedere cannot start: the production profile needs")
    for name in missing:
        assert name in lines[0]
    for name in set(COMPLETE) - set(missing) - {"DJANGO_SETTINGS_MODULE", "ELASTICSEARCH_URL"}:
        assert f"{name} (" not in lines[0]
    assert "Traceback" not in result.stderr
    assert "deploy/env.example" in lines[0]


def test_blank_values_count_as_missing():
    result = run(["manage.py", "check"], SECRET_KEY="   ")
    assert result.returncode == 78
    assert "SECRET_KEY" in result.stderr


def test_wsgi_entry_point_refuses_too():
    result = run(["-c", "import portal.wsgi"], drop=("SECRET_KEY",))
    assert result.returncode == 78
    assert result.stderr.strip().count("\n") == 0
    assert "SECRET_KEY" in result.stderr


def test_celery_worker_refuses_too():
    result = run(["-m", "celery", "-A", "portal", "worker", "--pool=solo"], drop=("DATABASE_URL",), C_FORCE_ROOT="1")
    assert result.returncode == 78, result.stderr[-2000:]
    assert "Belvedere cannot start" in result.stderr and "DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_elasticsearch_url_required_unless_telemetry_is_embedded():
    result = run(["manage.py", "check"], drop=("ELASTICSEARCH_URL",))
    assert result.returncode == 78 and "ELASTICSEARCH_URL" in result.stderr
    assert run(["manage.py", "check"], drop=("ELASTICSEARCH_URL",), TELEMETRY_BACKEND="embedded").returncode == 0


def test_complete_production_settings_are_https_only():
    code = (
        "from django.conf import settings as s;"
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, s.DEBUG,"
        " s.CONTENT_SECURITY_POLICY['DIRECTIVES']['default-src'], s.DATABASES['default']['ENGINE'],"
        " s.TELEMETRY_BACKENDS['default']['BACKEND'])"
    )
    result = run(["-c", "import django; django.setup();" + code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True", "True", "31536000", "True", "False", "[\"'self'\"]",
        "django.db.backends.postgresql", "apps.telemetry.backends.elasticsearch.ElasticsearchBackend",
    ]


@pytest.mark.django_db
def test_every_response_carries_a_content_security_policy(client):
    response = client.get("/accounts/login/")
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy
    assert "frame-ancestors 'self'" in policy
