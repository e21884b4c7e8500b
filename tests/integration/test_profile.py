"""The run used the services it was asked for: CI's integration profile must really hit
PostgreSQL and Redis, and the default profile the embedded ones."""
import os

import pytest
from django.conf import settings
from django.db import connection


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_services_in_use_match_the_requested_profile(client, celery_worker_process):
    integration = os.environ.get("BELVEDERE_INTEGRATION") == "1"
    broker = client.get("/readyz").json()["checks"]["broker"]
    assert broker["status"] == "ok"
    if integration:
        assert connection.vendor == "postgresql"
        assert settings.CELERY_BROKER_URL.startswith("redis://")
        assert broker["broker"] == "redis"
    else:
        expected_vendor = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
        assert connection.vendor == expected_vendor
        assert broker["broker"] == settings.CELERY_BROKER_URL.split("://", 1)[0]
