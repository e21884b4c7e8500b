"""Fixtures shared by the telemetry tests."""
import pytest


@pytest.fixture
def service(db, make_user):
    """The token of a collector account: a user allowed to post ingest batches (what node collectors use)."""
    from django.contrib.auth.models import Permission
    from rest_framework.authtoken.models import Token

    user = make_user("collector")
    user.user_permissions.add(Permission.objects.get(codename="add_ingestbatch"))
    return Token.objects.create(user=user).key
