"""Job tokens as a credential: ``Authorization: JobToken bvj_...`` for code running inside one job.

Only the endpoints that accept data from, or give data to, code inside a job list
:data:`JOB_API_AUTHENTICATION` (or :class:`JobTokenAuthentication` among their classes); everywhere
else a job token is simply not a credential.

The header is read here; what a key stands for is the jobs app's business (its ``JobToken`` rows):
it registers the resolver from its ``AppConfig.ready()``::

    register_job_token_resolver(resolve_job_token)

``resolve(key)`` returns DRF's ``(user, auth)`` pair for a valid key and raises
``AuthenticationFailed`` (saying why) for one that is not. Apps above jobs (telemetry, ranks,
saturation, vetting) import the authentication from here, not from the jobs app's API views.
"""
from __future__ import annotations

from typing import Any, Callable

from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions
from rest_framework.authentication import (BaseAuthentication, SessionAuthentication, TokenAuthentication,
                                           get_authorization_header)

_resolver: Callable[[str], tuple[Any, Any]] | None = None


def register_job_token_resolver(resolve: Callable[[str], tuple[Any, Any]]) -> None:
    """Say how a job token's key becomes ``(user, auth)``; registering again replaces it."""
    global _resolver
    _resolver = resolve


class JobTokenAuthentication(BaseAuthentication):
    keyword = "JobToken"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].decode(errors="replace").lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid job token header: expected 'JobToken <key>'.")
        if _resolver is None:
            raise ImproperlyConfigured("no job token resolver is registered (the jobs app registers one in its AppConfig.ready())")
        return _resolver(parts[1].decode(errors="replace"))

    def authenticate_header(self, request):
        return self.keyword


#: The API token, a job token, or the browser session: the endpoints code inside a job reads or writes.
JOB_API_AUTHENTICATION = [TokenAuthentication, JobTokenAuthentication, SessionAuthentication]
