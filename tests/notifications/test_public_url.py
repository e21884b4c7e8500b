"""Links in mail follow the portal's configured public address (issue 35, item 7): BELVEDERE_BASE_URL, the one
setting deploy/env.example documents, reaches the mail's links (SITE_URL only read when it is unset); start-up warns
when it is unset (a system check warning in the production profile, a note in the embedded one, a /readyz line)."""
import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "portal.settings.production",
    "SECRET_KEY": "t8Jq-vX2m_Lr9Pz4Kc7Wn1Ye6Hs3Ub5Dg0Fa8Qi2Ro4Tl7Vk9MxE",
    "DATABASE_URL": "postgres://belvedere@127.0.0.1:5432/belvedere",
    "ALLOWED_HOSTS": "belvedere.example.org",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "ELASTICSEARCH_URL": "https://es.example.org:9200",
}
PRINT_URLS = ("import django; django.setup(); from django.conf import settings; "
              "print(settings.SITE_URL); print(settings.BELVEDERE_BASE_URL)")


def run(args, **extra) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if key not in PRODUCTION and key != "SITE_URL" and not key.startswith("BELVEDERE_")}
    env.update(extra)
    return subprocess.run([sys.executable, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60)


def test_mail_links_use_the_documented_public_url(tmp_path):
    """deploy/env.example sets BELVEDERE_BASE_URL; the mail's links (SITE_URL) used to stay at 127.0.0.1:8000."""
    result = run(["-c", PRINT_URLS], DJANGO_SETTINGS_MODULE="portal.settings.embedded", BELVEDERE_DATA_DIR=str(tmp_path),
                 BELVEDERE_BASE_URL="https://belvedere.example.org/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["https://belvedere.example.org", "https://belvedere.example.org"]
    older = run(["-c", PRINT_URLS], DJANGO_SETTINGS_MODULE="portal.settings.embedded", BELVEDERE_DATA_DIR=str(tmp_path),
                SITE_URL="https://old.example.org")
    assert older.stdout.split() == ["https://old.example.org", "https://old.example.org"], older.stderr


def test_production_start_warns_when_the_public_url_is_unset():
    unset = run(["manage.py", "check"], **PRODUCTION)
    assert unset.returncode == 0, unset.stderr  # a warning, not a refusal
    output = unset.stdout + unset.stderr
    assert "belvedere.W001" in output and "BELVEDERE_BASE_URL is not set" in output and "127.0.0.1:8000" in output
    assert "deploy/env.example" in output
    configured = run(["manage.py", "check"], **PRODUCTION, BELVEDERE_BASE_URL="https://belvedere.example.org")
    assert configured.returncode == 0, configured.stderr
    assert "belvedere.W001" not in configured.stdout + configured.stderr


def test_embedded_profile_notes_it_and_readiness_says_so(settings):
    from django.core.checks import WARNING

    from apps.core.checks import check_public_url
    from apps.core.readiness import check_public_url as readiness_line

    settings.BELVEDERE_PROFILE, settings.BELVEDERE_BASE_URL_SET = "embedded", False
    settings.BELVEDERE_BASE_URL = "http://127.0.0.1:8000"
    [note] = check_public_url()
    assert note.id == "belvedere.I001" and note.level < WARNING  # make run's migrate prints it; nothing fails
    line = readiness_line()
    assert line.status == "warn" and not line.critical
    assert "BELVEDERE_BASE_URL is not set" in line.message and line.details["url"] == "http://127.0.0.1:8000"
    settings.BELVEDERE_BASE_URL_SET, settings.BELVEDERE_BASE_URL = True, "https://belvedere.example.org"
    assert check_public_url() == []
    assert readiness_line().status == "ok"
    settings.BELVEDERE_PROFILE, settings.BELVEDERE_BASE_URL = "production", "http://localhost:8000"
    [warning] = check_public_url()  # set, but to this machine: nobody else reaches it
    assert warning.id == "belvedere.W001" and "loopback" in warning.msg
