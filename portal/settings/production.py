"""Production profile: PostgreSQL, a Redis broker, Elasticsearch telemetry, HTTPS only.

Values that have no safe default must come from the environment; start-up stops with one line
naming every missing one (see ``deploy/env.example``).
"""
from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F401,F403
from .base import CONTENT_SECURITY_POLICY, REST_FRAMEWORK, env

BELVEDERE_PROFILE = "production"

REQUIRED_ENVIRONMENT = {
    "SECRET_KEY": "a long random string, e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(50))'`",
    "DATABASE_URL": "postgres://USER:PASSWORD@HOST:5432/NAME",
    "ALLOWED_HOSTS": "the portal's host names, comma-separated",
    "CELERY_BROKER_URL": "redis://HOST:6379/0",
}


def missing_required_environment(environ) -> list[str]:
    """Names of required variables that are unset or blank, in a stable order."""
    return [name for name in REQUIRED_ENVIRONMENT if not str(environ.get(name, "")).strip()]


_missing = missing_required_environment(env.ENVIRON)
if _missing:
    raise ImproperlyConfigured(
        "the production profile needs "
        + ", ".join(f"{name} ({REQUIRED_ENVIRONMENT[name]})" for name in _missing)
        + "; set them in the environment, see deploy/env.example."
    )


# Django's own measure of a weak key (security.W009, which only `check --deploy` reports): shorter than 50
# characters, fewer than 5 different ones, or Django's generated insecure prefix.
SECRET_KEY_MIN_LENGTH, SECRET_KEY_MIN_UNIQUE = 50, 5
PLACEHOLDER_MARKERS = ("change-me", "changeme", "change_me", "placeholder", "django-insecure-")


def secret_key_problem(key: str) -> str | None:
    """Why ``key`` may not sign production sessions, tokens and password resets, or None. A placeholder (the
    one in deploy/env.example, or any with its words) or a key weaker than Django's check asks for is refused:
    anyone who reads the repository could forge sessions."""
    key = key.strip()
    if any(marker in key.lower() for marker in PLACEHOLDER_MARKERS):
        return "is a placeholder (e.g. deploy/env.example's)"
    if len(key) < SECRET_KEY_MIN_LENGTH:
        return f"is {len(key)} characters long; at least {SECRET_KEY_MIN_LENGTH} are needed"
    if len(set(key)) < SECRET_KEY_MIN_UNIQUE:
        return f"has {len(set(key))} different characters; at least {SECRET_KEY_MIN_UNIQUE} are needed"
    return None


if (_weak := secret_key_problem(env("SECRET_KEY"))) is not None:
    raise ImproperlyConfigured(
        f"the production profile refuses SECRET_KEY: it {_weak}. Set SECRET_KEY to {REQUIRED_ENVIRONMENT['SECRET_KEY']}; "
        "see deploy/env.example."
    )
if env("TELEMETRY_BACKEND", default="elasticsearch") == "elasticsearch" and not env("ELASTICSEARCH_URL", default=""):
    raise ImproperlyConfigured(
        "the production profile stores telemetry in Elasticsearch: set ELASTICSEARCH_URL "
        "(e.g. https://es.example.org:9200), or TELEMETRY_BACKEND=embedded for a single-host install; "
        "see deploy/env.example."
    )

DEBUG = False
TELEMETRY_BACKEND = env("TELEMETRY_BACKEND", default="elasticsearch")
TELEMETRY_BACKENDS["default"]["BACKEND"] = {  # noqa: F405
    "embedded": "apps.telemetry.backends.embedded.EmbeddedBackend",
    "elasticsearch": "apps.telemetry.backends.elasticsearch.ElasticsearchBackend",
}.get(TELEMETRY_BACKEND, TELEMETRY_BACKEND)

# HTTPS everywhere: the portal sits behind a TLS-terminating proxy (deploy/nginx.conf).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 365)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# `check --deploy` warnings that are decisions, not oversights (deploy/README.md, "Security checks"):
# - W019, X_FRAME_OPTIONS is SAMEORIGIN, not DENY: the catalogue's explorer (/catalog/explorer/) shows its Dash app
#   in a frame of the portal's own origin; CSP frame-ancestors 'self' says the same, so no other site can frame it.
# - W021, SECURE_HSTS_PRELOAD off by default: the preload list is near-irreversible and binds every subdomain of
#   the registrable domain, which is the centre's to decide, not the portal's; SECURE_HSTS_PRELOAD=true opts in.
SILENCED_SYSTEM_CHECKS = ["security.W019", "security.W021"]
CONTENT_SECURITY_POLICY["DIRECTIVES"]["upgrade-insecure-requests"] = True
# Only the API's JSON renderer in production: the browsable API is a development aid.
REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"] = ["rest_framework.renderers.JSONRenderer"]
