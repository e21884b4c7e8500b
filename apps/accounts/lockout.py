"""Login lockout: django-axes counts failed logins; this module says when the caller may try again.

After ``AXES_FAILURE_LIMIT`` (``LOGIN_FAILURE_LIMIT``) wrong passwords for one username from one
address, that pair is refused -- even with the right password -- until ``AXES_COOLOFF_TIME``
(``LOGIN_LOCKOUT_MINUTES``) after its last failure. The login page then says so and when it ends
(status 429); the API answers 429 with ``Retry-After`` and the same words in ``detail``.

The counts live in the database (axes' ``AccessAttempt``), so every web process sees the same ones.
"""
import math
from dataclasses import dataclass
from datetime import datetime

from axes.backends import AxesStandaloneBackend
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off
from django.conf import settings
from django.db.models import Max
from django.http import JsonResponse
from django.shortcuts import render
from django.utils import timezone


def client_ip(request) -> str | None:
    """The caller's address: REMOTE_ADDR, or the entry of X-Forwarded-For that the trusted proxies
    (``TRUSTED_PROXY_COUNT``, shared with the API throttles) put there. With no trusted proxy the
    header is ignored: anyone can send it."""
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies and forwarded:
        addresses = [part.strip() for part in forwarded.split(",") if part.strip()]
        if addresses:
            return addresses[-min(proxies, len(addresses))]
    return request.META.get("REMOTE_ADDR")


class LoginLockoutBackend(AxesStandaloneBackend):
    """Refuses a locked-out username before any password is checked. Only password logins that come
    with a request are counted: a shell's or a test client's ``authenticate()`` has no address to
    lock, and OIDC logins carry no password."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or password is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


@dataclass(frozen=True)
class Lockout:
    until: datetime

    @property
    def seconds_left(self) -> int:
        return max(1, math.ceil((self.until - timezone.now()).total_seconds()))

    @property
    def message(self) -> str:
        minutes = math.ceil(self.seconds_left / 60)
        wait = f"{minutes} minute{'s' if minutes != 1 else ''}" if self.seconds_left >= 60 else f"{self.seconds_left} seconds"
        return (f"Too many failed logins for this username from your address: logging in is blocked until "
                f"{self.until:%H:%M} UTC (in {wait}). Check your username and password, then try again after that.")


def lockout_for(request, credentials: dict | None) -> Lockout:
    """When the lockout of this username and address ends: the cool-off after its last failure."""
    handler = AxesProxyHandler.get_implementation()
    last = None
    for attempts in handler.get_user_attempts(request, credentials or {}):
        newest = attempts.aggregate(newest=Max("attempt_time"))["newest"]
        if newest and (last is None or newest > last):
            last = newest
    cool_off = get_cool_off(request)
    until = (last or timezone.now()) + cool_off
    return Lockout(until=until.astimezone(timezone.get_fixed_timezone(0)))


def _credentials(request, credentials):
    if credentials:
        return credentials
    data = getattr(request, "data", None) or request.POST
    return {"username": data.get("username", "")}


def lockout_api_response(request, credentials=None) -> JsonResponse:
    lockout = lockout_for(request, _credentials(request, credentials))
    response = JsonResponse({"detail": lockout.message, "errors": [{"field": None, "line": None, "message": lockout.message}],
                             "retry_after": lockout.seconds_left, "locked_until": lockout.until.isoformat()},
                            status=429)
    response["Retry-After"] = str(lockout.seconds_left)
    return response


def lockout_response(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: what a locked-out login gets. The API: JSON in the error shape of every
    4xx; a page: the login page again, with the explanation instead of "wrong password"."""
    if request.path.startswith("/api/") or "application/json" in request.META.get("HTTP_ACCEPT", ""):
        return lockout_api_response(request, credentials)
    from django.contrib.auth.forms import AuthenticationForm

    credentials = _credentials(request, credentials)
    lockout = lockout_for(request, credentials)
    form = AuthenticationForm(request, initial={"username": credentials.get("username", "")})
    response = render(request, "accounts/login.html",
                      {"form": form, "lockout": lockout, "next": request.POST.get("next", "")}, status=429)
    response["Retry-After"] = str(lockout.seconds_left)
    return response
