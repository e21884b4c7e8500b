"""Django system checks of the portal's own settings (``manage.py check``, and every start: migrate, runserver,
gunicorn's first request through the checks Django runs).

* ``belvedere.W001`` (production profile): ``BELVEDERE_BASE_URL`` is unset or names this machine's loopback
  address, so every link in mail, webhooks and the triage inbox's prepared mail points to
  ``http://127.0.0.1:8000`` whatever address people reach the portal at.
* ``belvedere.I001`` (embedded profile, ``make run``): the same, as a note: a laptop's portal is reached there.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Info, Warning, register

LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def public_url_problem() -> str:
    """Why links in mail will not reach people ("" when BELVEDERE_BASE_URL is a public address)."""
    url = getattr(settings, "BELVEDERE_BASE_URL", "") or ""
    if not getattr(settings, "BELVEDERE_BASE_URL_SET", False):
        return f"BELVEDERE_BASE_URL is not set: links in mail and webhooks point to {url}"
    host = urlsplit(url).hostname or ""
    if not host:
        return f"BELVEDERE_BASE_URL={url!r} has no host name: links in mail and webhooks will not work"
    if host in LOOPBACK:
        return f"BELVEDERE_BASE_URL={url} is this machine's loopback address: links in mail reach no one else"
    return ""


HINT = ("Set BELVEDERE_BASE_URL to the address people open the portal at, e.g. https://belvedere.example.org "
        "(deploy/env.example).")


@register()
def check_public_url(app_configs=None, **kwargs):
    profile = getattr(settings, "BELVEDERE_PROFILE", "")
    problem = public_url_problem()
    if not problem or profile == "test":
        return []
    if profile == "production":
        return [Warning(problem, hint=HINT, id="belvedere.W001")]
    return [Info(problem, hint=HINT, id="belvedere.I001")]
