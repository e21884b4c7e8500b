"""Settings shared by every profile.

Every value an operator may change is read from the environment here, with the default that
suits the embedded profile; ``deploy/env.example`` documents each variable. The profile modules
(``embedded``, ``production``, ``test``) only change what differs between them.
"""
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
if env.bool("DJANGO_READ_DOT_ENV_FILE", default=False):
    env.read_env(str(BASE_DIR / ".env"))

# Which profile is running: "embedded", "production" or "test". Set by the profile module.
BELVEDERE_PROFILE = "base"

# ---------------------------------------------------------------------------------------------
# Core Django
# ---------------------------------------------------------------------------------------------
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default="")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Where the embedded profile keeps its SQLite database, broker queue and telemetry files.
DATA_DIR = Path(env("BELVEDERE_DATA_DIR", default=str(BASE_DIR / "var"))).resolve()

# The portal's public address, as people reach it: links printed into job output, in e-mails (job mail, the
# digest, vetting recommendations), webhooks and the triage inbox's prepared mail. One setting for all of them;
# SITE_URL is its older name, read when BELVEDERE_BASE_URL is unset. Unset, links point to the local default and
# start-up says so (system check belvedere.W001 in the production profile, belvedere.I001 and /readyz's
# "public_url" line otherwise).
PUBLIC_URL_DEFAULT = f"http://{env('BELVEDERE_BIND', default='127.0.0.1:8000').strip() or '127.0.0.1:8000'}"  # make run's address
BELVEDERE_BASE_URL_SET = bool(env("BELVEDERE_BASE_URL", default="").strip() or env("SITE_URL", default="").strip())
BELVEDERE_BASE_URL = (env("BELVEDERE_BASE_URL", default="").strip() or env("SITE_URL", default="").strip()
                      or PUBLIC_URL_DEFAULT).rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "django_tables2",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_results",
    "django_celery_beat",
    "csp",
    # Belvedere's own apps, one per domain.
    "apps.core",
    "apps.accounts",
    "apps.jobs",
    "apps.topology",
    "apps.ranks",
    "apps.telemetry",
    "apps.saturation",
    "apps.vetting",
    "apps.edf",
    "apps.namespaces",
    "apps.catalog",
    "apps.appmetrics",
    "apps.network",
    "apps.storage",
    "apps.flightrec",
    "apps.campaigns",
    "apps.system",
    "apps.reports",
    "apps.triage",
    "apps.notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files, answered here with their precompressed .br/.gz copies (see STORAGES below).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Everything else (pages, JSON, CSV) is gzipped when the client accepts it; above every
    # middleware that reads or changes the body. BREACH: see apps/core/compression.py.
    "apps.core.compression.PortalGZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view says otherwise (login, /healthz, /readyz, API,
    # which authenticates by itself).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.core.context_processors.navigation",
                "apps.core.context_processors.demo_build",
            ],
        },
    },
]

# ---------------------------------------------------------------------------------------------
# Database: DATABASE_URL, e.g. postgres://belvedere@db/belvedere; SQLite file by default.
# ---------------------------------------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'belvedere.sqlite3'}")}


def tune_sqlite(database: dict) -> dict:
    """Let the web server, worker and beat share one SQLite file without "database is locked".

    WAL lets readers run beside one writer; IMMEDIATE transactions take the write lock up front so
    two writers queue on ``busy_timeout`` instead of failing at commit.
    """
    if database["ENGINE"] == "django.db.backends.sqlite3":
        options = database.setdefault("OPTIONS", {})
        options.setdefault("timeout", 30)
        options.setdefault("transaction_mode", "IMMEDIATE")
        options.setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
    return database


tune_sqlite(DATABASES["default"])
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------------------------------------
# Authentication
# ---------------------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "core:home"
LOGOUT_REDIRECT_URL = "accounts:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# OIDC single sign-on (mozilla-django-oidc): switched on by setting OIDC_RP_CLIENT_ID.
OIDC_RP_CLIENT_ID = env("OIDC_RP_CLIENT_ID", default="")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
if OIDC_ENABLED:
    OIDC_RP_CLIENT_SECRET = env("OIDC_RP_CLIENT_SECRET")
    OIDC_RP_SIGN_ALGO = env("OIDC_RP_SIGN_ALGO", default="RS256")
    OIDC_OP_AUTHORIZATION_ENDPOINT = env("OIDC_OP_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = env("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = env("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env("OIDC_OP_JWKS_ENDPOINT", default="")
    OIDC_RP_SCOPES = env("OIDC_RP_SCOPES", default="openid email profile")
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.insert(0, "apps.accounts.oidc.ProjectClaimsOIDCBackend")
# Which claims carry the username, the staff flag and the Slurm accounts (see apps/accounts/claims.py).
OIDC_USERNAME_CLAIM = env("OIDC_USERNAME_CLAIM", default="preferred_username")
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM", default="groups")
OIDC_STAFF_GROUP = env("OIDC_STAFF_GROUP", default="belvedere-staff")
OIDC_ACCOUNT_GROUP_PREFIX = env("OIDC_ACCOUNT_GROUP_PREFIX", default="slurm-")
OIDC_PROVIDER_NAME = env("OIDC_PROVIDER_NAME", default="single sign-on")

# ---------------------------------------------------------------------------------------------
# Internationalisation and time: everything is stored and exchanged in UTC.
# ---------------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-gb"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# ---------------------------------------------------------------------------------------------
# Static files: whitenoise serves them in every profile, so no separate web server is needed.
# ---------------------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
# collectstatic writes a hashed name and a .gz copy of every file (a .br one too when the brotli
# package is installed); whitenoise sends the smallest copy the browser accepts.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# ---------------------------------------------------------------------------------------------
# Request limits: refuse oversized bodies with a clear 413/400 instead of reading them.
# ---------------------------------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=10 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = env.int("FILE_UPLOAD_MAX_MEMORY_SIZE", default=10 * 1024 * 1024)

# ---------------------------------------------------------------------------------------------
# Security headers that apply in every profile; production.py adds HTTPS-only settings.
# ---------------------------------------------------------------------------------------------
X_FRAME_OPTIONS = "SAMEORIGIN"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # Plotly sets inline style attributes on the SVG it draws.
        "style-src": ["'self'", "'unsafe-inline'"],
        # blob: Plotly renders a figure to PNG (modebar camera, PNG buttons) through an object URL.
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'self'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    },
}

# ---------------------------------------------------------------------------------------------
# REST API
# ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: an unauthenticated API call then gets 401 with a WWW-Authenticate header.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Bounded input: JSON bodies of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (413) nested at most
    # API_MAX_JSON_DEPTH levels (400); ?limit= 1..1000 and ?offset= checked (400 naming them).
    "DEFAULT_PARSER_CLASSES": [
        "apps.core.api.parsers.BoundedJSONParser",
        "apps.core.api.parsers.BoundedFormParser",
        "apps.core.api.parsers.BoundedMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.core.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "apps.core.api.exceptions.api_exception_handler",
    # Views opt in with ScopedRateThrottle and a throttle_scope; a refusal is a 429 with Retry-After.
    "DEFAULT_THROTTLE_RATES": {
        # POST /api/v1/auth/token/ per client address, whatever the outcome (wrong passwords also lock out, below).
        "login": env("THROTTLE_LOGIN_RATE", default="30/minute"),
        # POST /api/v1/jobs/<cluster>/<id>/token/ per user.
        "job_token": env("THROTTLE_JOB_TOKEN_RATE", default="120/hour"),
    },
    # Reverse proxies in front of the portal that set X-Forwarded-For (deploy/nginx.conf: 1). With 0 the
    # client address is REMOTE_ADDR and X-Forwarded-For, which anyone can send, is ignored.
    "NUM_PROXIES": env.int("TRUSTED_PROXY_COUNT", default=0),
}

# ---------------------------------------------------------------------------------------------
# Login lockout and throttling (see apps/accounts/README.md). django-axes counts failed logins in
# the database (shared by every web process); the throttles' counters live in the cache, which must
# be shared by the web processes too: a file cache under DATA_DIR by default (one host), Redis
# (CACHE_URL=redis://host:6379/1) when several hosts serve the portal.
# ---------------------------------------------------------------------------------------------
_CACHE_URL = env("CACHE_URL", default=f"filecache://{DATA_DIR / 'cache'}")
CACHES = {
    "default": env.cache_url_config(_CACHE_URL),
    # Rendered answers of job products (apps/core/api/conditional.py), keyed by the product's version so
    # nothing needs sharing for correctness: local memory per process by default, the CACHE_URL Redis
    # when that is Redis, or PRODUCTS_CACHE_URL (e.g. redis://redis:6379/2).
    "products": env.cache(
        "PRODUCTS_CACHE_URL",
        default=_CACHE_URL if _CACHE_URL.startswith(("redis://", "rediss://")) else "locmemcache://belvedere-products?MAX_ENTRIES=64",
    ),
}
CACHES["products"].setdefault("KEY_PREFIX", "products")
PRODUCTS_CACHE_SECONDS = env.int("PRODUCTS_CACHE_SECONDS", default=3600)
PRODUCTS_CACHE_ITEM_MAX_BYTES = env.int("PRODUCTS_CACHE_ITEM_MAX_BYTES", default=8 * 1024 * 1024)
INSTALLED_APPS.append("axes")
# Last, so that it sees the answer of the login views.
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
# First: a locked-out username is refused before any password is checked (also for OIDC's backend).
AUTHENTICATION_BACKENDS.insert(0, "apps.accounts.lockout.LoginLockoutBackend")
# After LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that pair is locked
# out for LOGIN_LOCKOUT_MINUTES after the last failure; a success clears the count.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = __import__("datetime").timedelta(minutes=env.float("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Failures while locked out do not extend the lockout: the time the page announces stays true.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "apps.accounts.lockout.client_ip"
AXES_LOCKOUT_CALLABLE = "apps.accounts.lockout.lockout_response"
AXES_VERBOSE = False
SPECTACULAR_SETTINGS = {
    "TITLE": "Belvedere API",
    "DESCRIPTION": (
        "Job-scoped observability and self-service for the ML platform. Authenticate with a "
        "session or with `Authorization: Token <key>`. Every 4xx answer has the form "
        '`{"detail": "...", "errors": [{"field": ..., "line": ..., "message": ...}]}`. '
        "Back to the portal: [Belvedere](/)."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs are public so code generators and other tools can fetch them.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "apps.jobs.choices.JobStateChoices",
        "NodeStateEnum": "apps.topology.choices.NodeStateChoices",
        "VettingSeverityEnum": "apps.vetting.choices.RuleSeverityChoices",
        "VettingRuleActionEnum": "apps.vetting.choices.RuleActionChoices",
        "VettingNodeActionEnum": "apps.vetting.choices.NodeHealthActionChoices",
        # node state, and an event's from/to state (the node detail and action answers show both)
        "VettingNodeStateEnum": "apps.vetting.choices.NodeHealthStateChoices",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.core.api.schema.add_error_responses",
        "apps.core.api.schema.add_summaries",
    ],
}

# ---------------------------------------------------------------------------------------------
# Celery: a real worker and beat in every profile. CELERY_BROKER_URL picks the broker; the
# embedded default is kombu's filesystem transport, which needs no server.
# ---------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://localhost/")
BROKER_DIR = DATA_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem"):
    for _folder in ("queue", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
# Redis keeps each delivered, not yet acknowledged message and gives it to another worker when it
# is older than this: longer than any task may run (time limit) plus the longest retry countdown, or
# a running task would be delivered twice. (The filesystem broker has no such timeout: a message a
# lost worker process held comes back through its parent's reject, one a lost worker held is put back
# by the next worker that looks for messages, at once: portal/broker.py.)
BROKER_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT",
                                    default=env.int("CELERY_TASK_TIME_LIMIT", default=30 * 60) + 15 * 60)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # Poll the queue folder often: the default 1 s makes every round-trip take a second.
        "polling_interval": 0.1,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {
        "visibility_timeout": BROKER_VISIBILITY_TIMEOUT,
        # How often a worker looks for such messages (seconds between sweeps x sweeps per scan).
        "unacked_restore_interval": env.int("CELERY_UNACKED_RESTORE_INTERVAL", default=10),
        "unacked_restore_throttle": env.int("CELERY_UNACKED_RESTORE_THROTTLE", default=10),
    }
)
# Idempotent tasks are acknowledged after they ran (apps/core/tasks.IDEMPOTENT): each worker
# process reserves one message at a time, so a message is never parked behind a busy or dead
# process, and a process is replaced after this many tasks (bounds leaks in long-lived children).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_MAX_TASKS_PER_CHILD = env.int("CELERY_WORKER_MAX_TASKS_PER_CHILD", default=200)
CELERY_RESULT_BACKEND = "django-db"
CELERY_RESULT_EXTENDED = True
CELERY_CACHE_BACKEND = "django-cache"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = "UTC"
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=30 * 60)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=25 * 60)
CELERY_TASK_TRACK_STARTED = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
BEAT_HEARTBEAT_SECONDS = env.int("BELVEDERE_BEAT_HEARTBEAT_SECONDS", default=30)
# A task "running" with no progress for this long lost its worker (longer than the time limit and,
# on Redis, than the redelivery of an unacknowledged message): the sweepers end it with a reason.
TASK_STALE_SECONDS = env.int("TASK_STALE_SECONDS", default=CELERY_TASK_TIME_LIMIT + 300 + (
    0 if CELERY_BROKER_URL.startswith("filesystem") else BROKER_VISIBILITY_TIMEOUT + 300))
SWEEP_SECONDS = env.int("BELVEDERE_SWEEP_SECONDS", default=300)
CELERY_BEAT_SCHEDULE = {
    "core.beat_heartbeat": {"task": "core.beat_heartbeat", "schedule": float(BEAT_HEARTBEAT_SECONDS),
                            "options": {"expires": float(BEAT_HEARTBEAT_SECONDS)}},
    "core.sweep_stale_runs": {"task": "core.sweep_stale_runs", "schedule": float(SWEEP_SECONDS)},
    "saturation.sweep_stale_scoring": {"task": "saturation.sweep_stale_scoring", "schedule": float(SWEEP_SECONDS)},
}

# ---------------------------------------------------------------------------------------------
# Readiness (/readyz): how long to wait for a worker to answer the broker round-trip, and how
# long one answer is reused so that a busy load balancer does not flood the queue.
# ---------------------------------------------------------------------------------------------
READYZ_BROKER_TIMEOUT = env.float("READYZ_BROKER_TIMEOUT", default=5.0)
# When the ping task waits past that, a broadcast ping tells a busy worker (alive, every pool process
# running a task: /readyz warns but stays 200) from none (503).
READYZ_CONTROL_PING_TIMEOUT = env.float("READYZ_CONTROL_PING_TIMEOUT", default=1.0)
READYZ_CACHE_SECONDS = env.float("READYZ_CACHE_SECONDS", default=2.0)
# Queue the readiness ping goes to: one that every worker consumes.
READYZ_PING_QUEUE = env("READYZ_PING_QUEUE", default="celery")
# A ping nobody answered is dropped by the worker that finds it this many seconds after it was sent.
READYZ_PING_EXPIRES = env.float("READYZ_PING_EXPIRES", default=60.0)

# ---------------------------------------------------------------------------------------------
# Telemetry store (see apps/telemetry/README.md). Shaped like Django's STORAGES: one alias per
# store, each a dotted backend class plus options.
# ---------------------------------------------------------------------------------------------
TELEMETRY_BACKEND = env("TELEMETRY_BACKEND", default="embedded")
# Limits of POST /api/v1/telemetry/samples/: bytes as sent, bytes once gunzipped, unpacked/compressed
# ratio (checked while inflating: a gzip bomb is refused after its first 128 KiB), samples per request;
# bytes of text per /import/ (read whole by the importers); and rows per /series/ answer.
# Samples are read one at a time, so a request's memory follows the samples kept, not the body.
TELEMETRY_MAX_BODY_BYTES = env.int("TELEMETRY_MAX_BODY_BYTES", default=32 * 1024 * 1024)
TELEMETRY_MAX_UNPACKED_BYTES = env.int("TELEMETRY_MAX_UNPACKED_BYTES", default=64 * 1024 * 1024)
TELEMETRY_MAX_COMPRESSION_RATIO = env.float("TELEMETRY_MAX_COMPRESSION_RATIO", default=500.0)
TELEMETRY_MAX_SAMPLES_PER_REQUEST = env.int("TELEMETRY_MAX_SAMPLES_PER_REQUEST", default=200_000)
TELEMETRY_MAX_IMPORT_BYTES = env.int("TELEMETRY_MAX_IMPORT_BYTES", default=16 * 1024 * 1024)
TELEMETRY_MAX_SERIES_ROWS = env.int("TELEMETRY_MAX_SERIES_ROWS", default=200_000)
# Job data products: how often running jobs are re-read, and for how long after the end.
TELEMETRY_REFRESH_SECONDS = env.int("TELEMETRY_REFRESH_SECONDS", default=300)
TELEMETRY_RECENT_HOURS = env.int("TELEMETRY_RECENT_HOURS", default=6)
# Saturation scores of running jobs are recomputed this often (seconds); finished jobs once.
SATURATION_REFRESH_SECONDS = env.int("SATURATION_REFRESH_SECONDS", default=600)
# Nodes read from the telemetry store per request while scoring a job (bounds the worker's memory).
SATURATION_HOSTS_PER_READ = env.int("SATURATION_HOSTS_PER_READ", default=64)
# How many hours of the running demo Megatron job `manage.py demo` fills with synthetic telemetry.
DEMO_TELEMETRY_HOURS = env.float("DEMO_TELEMETRY_HOURS", default=3.0)
# Live reads of running jobs from the DCGM host engines on compute nodes (0: off). The workers need
# DCGM's Python bindings (DCGM_HOME) and network access to <node>:<port>.
TELEMETRY_DCGM_PORT = env.int("TELEMETRY_DCGM_PORT", default=0)
TELEMETRY_DCGM_SECONDS = env.float("TELEMETRY_DCGM_SECONDS", default=5.0)
TELEMETRY_DCGM_MAX_NODES = env.int("TELEMETRY_DCGM_MAX_NODES", default=256)
ELASTICSEARCH_URL = env("ELASTICSEARCH_URL", default="")
# Retention tiers (apps/telemetry/retention.py): raw samples, 1-minute and 10-minute rollups, in days each. A read
# never answers from a tier past its retention; beat's telemetry.expire removes whole day partitions (embedded) or
# daily indices (Elasticsearch) once they lie wholly before it, every TELEMETRY_RETENTION_SECONDS.
TELEMETRY_RETENTION_RAW_DAYS = env.float("TELEMETRY_RETENTION_RAW_DAYS", default=30.0)
TELEMETRY_RETENTION_1M_DAYS = env.float("TELEMETRY_RETENTION_1M_DAYS", default=90.0)
TELEMETRY_RETENTION_10M_DAYS = env.float("TELEMETRY_RETENTION_10M_DAYS", default=365.0)
TELEMETRY_RETENTION_SECONDS = env.int("TELEMETRY_RETENTION_SECONDS", default=3600)
# The embedded store's partition width: 24 (a table per UTC day) or 1 (a table per hour, for retentions of hours).
TELEMETRY_PARTITION_HOURS = env.int("TELEMETRY_PARTITION_HOURS", default=24)
TELEMETRY_BACKENDS = {
    "default": {
        "BACKEND": {
            "embedded": "apps.telemetry.backends.embedded.EmbeddedBackend",
            "elasticsearch": "apps.telemetry.backends.elasticsearch.ElasticsearchBackend",
        }.get(TELEMETRY_BACKEND, TELEMETRY_BACKEND),
        "OPTIONS": {
            "path": str(DATA_DIR / "telemetry"),
            "url": ELASTICSEARCH_URL,
            "index_prefix": env("ELASTICSEARCH_INDEX_PREFIX", default="belvedere-telemetry"),
            "retention": {"raw_days": TELEMETRY_RETENTION_RAW_DAYS, "m1_days": TELEMETRY_RETENTION_1M_DAYS,
                          "m10_days": TELEMETRY_RETENTION_10M_DAYS},
            "partition_hours": TELEMETRY_PARTITION_HOURS,
        },
    },
}

# ---------------------------------------------------------------------------------------------
# Logging: one line per record to stderr, which honcho, systemd and Docker all collect.
# ---------------------------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# ---------------------------------------------------------------------------------------------
# Jobs and Slurm (see apps/jobs/README.md)
# ---------------------------------------------------------------------------------------------
# The cluster `make run` and the TaskProlog name by default.
SLURM_CLUSTER_NAME = env("SLURM_CLUSTER_NAME", default="alps")
# Seconds a Slurm command may take before the sync gives up on it.
SLURM_COMMAND_TIMEOUT = env.float("SLURM_COMMAND_TIMEOUT", default=60.0)
# How far back each sync asks sacct for finished jobs.
SLURM_SACCT_LOOKBACK_HOURS = env.int("SLURM_SACCT_LOOKBACK_HOURS", default=24)
# How often beat syncs every enabled cluster, in seconds.
SLURM_SYNC_SECONDS = env.int("SLURM_SYNC_SECONDS", default=60)
# Job tokens keep working this many hours after their job ended (late uploads from epilogs).
JOB_TOKEN_GRACE_HOURS = env.int("JOB_TOKEN_GRACE_HOURS", default=24)
# A job's own writes (a job token's samples, imports, metrics; any writer's metrics of the job) must fall in its
# run time widened by this many minutes each side; a running job's window ends at now + margin, a pending job's
# runs from its submission to now + margin (apps/core/timebounds.py). Times outside are refused or dropped, saying so.
JOB_WRITE_MARGIN_MINUTES = env.float("JOB_WRITE_MARGIN_MINUTES", default=10.0)
CELERY_BEAT_SCHEDULE["jobs.sync_clusters"] = {"task": "jobs.sync_clusters", "schedule": float(SLURM_SYNC_SECONDS)}
CELERY_BEAT_SCHEDULE["telemetry.materialize_recent_jobs"] = {"task": "telemetry.materialize_recent_jobs",
                                                             "schedule": float(TELEMETRY_REFRESH_SECONDS)}
CELERY_BEAT_SCHEDULE["saturation.score_recent_jobs"] = {"task": "saturation.score_recent_jobs",
                                                         "schedule": float(SATURATION_REFRESH_SECONDS)}
CELERY_BEAT_SCHEDULE["telemetry.expire"] = {"task": "telemetry.expire", "schedule": float(TELEMETRY_RETENTION_SECONDS)}
if TELEMETRY_DCGM_PORT:
    CELERY_BEAT_SCHEDULE["telemetry.read_dcgm_live_running"] = {"task": "telemetry.read_dcgm_live_running", "schedule": 60.0}
# Clusters with sync mode "slurmrestd" are read from their slurmrestd_url (http(s)://host:port or
# unix:///path/to/socket); requests time out after SLURM_COMMAND_TIMEOUT. With rest_auth/jwt the
# sync sends X-SLURM-USER-NAME and X-SLURM-USER-TOKEN (a JWT from `scontrol token`); leave both
# empty for rest_auth/local on a Unix socket. SLURMRESTD_TOKEN_FILE, when set, is read at every
# sync (a rotated token needs no restart) and wins over SLURMRESTD_TOKEN.
SLURMRESTD_USER_NAME = env("SLURMRESTD_USER_NAME", default="")
SLURMRESTD_TOKEN = env("SLURMRESTD_TOKEN", default="")
SLURMRESTD_TOKEN_FILE = env("SLURMRESTD_TOKEN_FILE", default="")
# The OpenAPI plugin version in slurmrestd's paths: v0.0.38 for Slurm 22.05.
SLURMRESTD_API_VERSION = env("SLURMRESTD_API_VERSION", default="v0.0.38")

# ---------------------------------------------------------------------------------------------
# Vetting (see apps/vetting/README.md)
# ---------------------------------------------------------------------------------------------
# The portal's address as people reach it in e-mails and webhooks: BELVEDERE_BASE_URL (above), one setting.
SITE_URL = BELVEDERE_BASE_URL
# Drain and return run scontrol only when this is false; a dry run records the command it would run.
VETTING_ACTIONS_DRY_RUN = env.bool("VETTING_ACTIONS_DRY_RUN", default=True)
# New recommendations are mailed to these addresses (comma-separated) and posted to this webhook (JSON).
VETTING_NOTIFY_EMAILS = env.list("VETTING_NOTIFY_EMAILS", default=[])
VETTING_WEBHOOK_URL = env("VETTING_WEBHOOK_URL", default="")
# Beat evaluates every rule over every node this often (seconds); new results are evaluated at once.
VETTING_RULES_SECONDS = env.int("VETTING_RULES_SECONDS", default=900)
# Largest vetting upload (vetnode text, dcgmi diag JSON, API JSON), bytes.
VETTING_MAX_UPLOAD_BYTES = env.int("VETTING_MAX_UPLOAD_BYTES", default=16 * 1024 * 1024)
CELERY_BEAT_SCHEDULE["vetting.evaluate_rules"] = {"task": "vetting.evaluate_rules", "schedule": float(VETTING_RULES_SECONDS)}

# Application metrics (apps/appmetrics/README.md): largest Megatron-LM log read per upload (streamed line by line,
# so memory stays small) and largest TensorBoard event file, bytes.
APPMETRICS_MAX_LOG_BYTES = env.int("APPMETRICS_MAX_LOG_BYTES", default=512 * 1024 * 1024)
APPMETRICS_MAX_TENSORBOARD_BYTES = env.int("APPMETRICS_MAX_TENSORBOARD_BYTES", default=64 * 1024 * 1024)
# PyTorch Flight Recorder dumps (apps.flightrec): where the posted files are kept, the most bytes one rank's dump and
# one .tar.gz of a dump folder may have, and how long after a dump the job's analysis waits for its peers' dumps.
FLIGHTREC_DIR = Path(env("FLIGHTREC_DIR", default=str(DATA_DIR / "flightrec")))
FLIGHTREC_MAX_DUMP_BYTES = env.int("FLIGHTREC_MAX_DUMP_BYTES", default=64 * 1024 * 1024)
FLIGHTREC_MAX_TAR_BYTES = env.int("FLIGHTREC_MAX_TAR_BYTES", default=2 * 1024 * 1024 * 1024)
FLIGHTREC_ANALYSE_DELAY_SECONDS = env.int("FLIGHTREC_ANALYSE_DELAY_SECONDS", default=15)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="belvedere@localhost")

# ---------------------------------------------------------------------------------------------
# Namespaces on the service plane (see apps/namespaces/README.md)
# ---------------------------------------------------------------------------------------------
# What the cluster offers (GPU models and MIG slices, storage classes, blueprints, reserved names): a YAML file.
NAMESPACES_INVENTORY = env("NAMESPACES_INVENTORY", default="")
# The GitOps repository: a local clone the portal writes and commits to; with a remote, every commit is pushed.
NAMESPACES_GIT_PATH = env("NAMESPACES_GIT_PATH", default=str(DATA_DIR / "gitops"))
NAMESPACES_GIT_REMOTE = env("NAMESPACES_GIT_REMOTE", default="")
NAMESPACES_GIT_BRANCH = env("NAMESPACES_GIT_BRANCH", default="main")
# Argo CD, to read each namespace's sync and health back (empty: "committed, no Argo CD configured").
ARGOCD_URL = env("ARGOCD_URL", default="")
ARGOCD_TOKEN = env("ARGOCD_TOKEN", default="")
ARGOCD_VERIFY_TLS = env.bool("ARGOCD_VERIFY_TLS", default=True)
ARGOCD_TIMEOUT = env.float("ARGOCD_TIMEOUT", default=10.0)
# The Application the platform's ApplicationSet makes for each tenant directory.
ARGOCD_TENANT_APP = env("ARGOCD_TENANT_APP", default="tenant-{namespace}")
ARGOCD_TENANT_PROJECT = env("ARGOCD_TENANT_PROJECT", default="tenants")
NAMESPACES_STATUS_SECONDS = env.int("NAMESPACES_STATUS_SECONDS", default=120)
CELERY_BEAT_SCHEDULE["namespaces.refresh_statuses"] = {"task": "namespaces.refresh_statuses", "schedule": float(NAMESPACES_STATUS_SECONDS)}
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)

# ---------------------------------------------------------------------------------------------
# The whole machine, staff triage, usage reports and notifications (apps/system, apps/triage,
# apps/reports, apps/notifications)
# ---------------------------------------------------------------------------------------------
# A running job wastes its GPUs when its steady saturation score is under WASTE_SCORE_BELOW (0-100) or at least
# WASTE_IDLE_SHARE of its GPU-hours are lost (idle GPUs, stalls, straggler waits, failed nodes:
# apps/saturation/waste.py). No verdict while it warms up: until the scoring sees its GPUs' median busy share pass
# 0.5, or for at most SATURATION_WARMUP_MAX_SECONDS from its start (then GPUs that never got busy are idle).
WASTE_SCORE_BELOW = env.float("WASTE_SCORE_BELOW", default=30.0)
WASTE_IDLE_SHARE = env.float("WASTE_IDLE_SHARE", default=0.25)
SATURATION_WARMUP_MAX_SECONDS = env.float("SATURATION_WARMUP_MAX_SECONDS", default=1800.0)
# Beat rebuilds the staff triage inbox from its sources this often (seconds).
TRIAGE_SYNC_SECONDS = env.int("TRIAGE_SYNC_SECONDS", default=120)
CELERY_BEAT_SCHEDULE["triage.sync_inbox"] = {"task": "triage.sync_inbox", "schedule": float(TRIAGE_SYNC_SECONDS)}
# Mail to a job's user (projects opt in): looked for this often; at most one mail per job and reason
# within NOTIFY_RATE_LIMIT_HOURS. A straggler must persist NOTIFY_STRAGGLER_MINUTES before it is mailed.
NOTIFY_SECONDS = env.int("NOTIFY_SECONDS", default=300)
NOTIFY_RATE_LIMIT_HOURS = env.float("NOTIFY_RATE_LIMIT_HOURS", default=24.0)
NOTIFY_STRAGGLER_MINUTES = env.int("NOTIFY_STRAGGLER_MINUTES", default=30)
CELERY_BEAT_SCHEDULE["notifications.notify_running_jobs"] = {"task": "notifications.notify_running_jobs",
                                                              "schedule": float(NOTIFY_SECONDS)}
# The opt-in job-end summary: waits up to NOTIFY_JOB_END_WAIT_MINUTES for the job's final scoring; jobs that ended
# within NOTIFY_JOB_END_LOOKBACK_HOURS are looked at.
NOTIFY_JOB_END_WAIT_MINUTES = env.int("NOTIFY_JOB_END_WAIT_MINUTES", default=30)
NOTIFY_JOB_END_LOOKBACK_HOURS = env.float("NOTIFY_JOB_END_LOOKBACK_HOURS", default=48.0)
CELERY_BEAT_SCHEDULE["notifications.notify_ended_jobs"] = {"task": "notifications.notify_ended_jobs",
                                                            "schedule": float(NOTIFY_SECONDS)}
# The staff digest of the triage inbox: to these addresses (comma-separated; empty: no digest), this often.
NOTIFY_STAFF_DIGEST_EMAILS = env.list("NOTIFY_STAFF_DIGEST_EMAILS", default=[])
NOTIFY_STAFF_DIGEST_HOURS = env.float("NOTIFY_STAFF_DIGEST_HOURS", default=24.0)
CELERY_BEAT_SCHEDULE["notifications.staff_digest"] = {"task": "notifications.staff_digest",
                                                       "schedule": 3600.0 * NOTIFY_STAFF_DIGEST_HOURS}
# How mail leaves: Django's SMTP backend to EMAIL_HOST:EMAIL_PORT by default; the embedded profile prints
# mail on the console unless EMAIL_BACKEND is set.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")

# ---------------------------------------------------------------------------------------------
# Catalogue of data products (see apps/catalog/README.md)
# ---------------------------------------------------------------------------------------------
# Folders of product files (one YAML per product) besides the built-in apps/catalog/products/; colon-separated.
CATALOG_PATHS = [path for path in env("CATALOG_PATHS", default="").split(":") if path]
# How often beat looks for products whose checks are due (each product says how often its checks run).
CATALOG_SCHEDULE_SECONDS = env.int("CATALOG_SCHEDULE_SECONDS", default=60)
CELERY_BEAT_SCHEDULE["catalog.schedule_checks"] = {"task": "catalog.schedule_checks", "schedule": float(CATALOG_SCHEDULE_SECONDS)}
# Elasticsearch for products declared on index patterns (default: the telemetry one, ELASTICSEARCH_URL).
CATALOG_ELASTICSEARCH_URL = env("CATALOG_ELASTICSEARCH_URL", default="")
CATALOG_ELASTICSEARCH_API_KEY = env("CATALOG_ELASTICSEARCH_API_KEY", default="")
CATALOG_ELASTICSEARCH_TIMEOUT = env.float("CATALOG_ELASTICSEARCH_TIMEOUT", default=20.0)
CATALOG_ELASTICSEARCH_MAX_MEMBERS = env.int("CATALOG_ELASTICSEARCH_MAX_MEMBERS", default=20000)
CATALOG_API_TIMEOUT = env.float("CATALOG_API_TIMEOUT", default=10.0)
# Hours of fleet-wide GPU telemetry (every GPU, 60 s) `manage.py demo` writes for the catalogue's products.
DEMO_FLEET_HOURS = env.float("DEMO_FLEET_HOURS", default=2.0)

# Job page: how often the page of a running job asks for news (first screen and drawn figures), in place.
JOB_PAGE_LIVE_SECONDS = env.int("JOB_PAGE_LIVE_SECONDS", default=30)
# Job page: the first screen and each panel's HTML are kept this long per job state (panels that version
# their data, like the saturation product, change at once when it does).
JOB_PAGE_CACHE_SECONDS = env.int("JOB_PAGE_CACHE_SECONDS", default=15)

# The host side (issue 39): page cache resident in GPU memory (coherent-memory nodes such as GH200) of at least this
# many GB (10^9 bytes) on one GPU, before or during a job, is a finding on its page and a pre-flight fact.
HOST_PAGE_CACHE_GPU_GB = env.float("HOST_PAGE_CACHE_GPU_GB", default=4.0)

# Training campaigns (apps/campaigns): a campaign's goodput is kept this many seconds under the data it reads (its
# jobs, the application series written, the scores; 0 computes it on every request), and beat looks for new
# campaigns among the synced jobs every CAMPAIGN_DETECT_SECONDS.
CAMPAIGN_CACHE_SECONDS = env.int("CAMPAIGN_CACHE_SECONDS", default=300)
CAMPAIGN_DETECT_SECONDS = env.int("CAMPAIGN_DETECT_SECONDS", default=300)
CELERY_BEAT_SCHEDULE["campaigns.detect"] = {"task": "campaigns.detect", "schedule": float(CAMPAIGN_DETECT_SECONDS)}

# ---------------------------------------------------------------------------------------------
# Live refresh of job products (see apps/core/README.md, "Refreshing job products")
# ---------------------------------------------------------------------------------------------
# Ingestion marks the jobs a batch touches dirty; their products are brought up to date this many
# seconds later (batches arriving meanwhile are coalesced into the same refresh; one in flight per job).
JOB_REFRESH_DEBOUNCE_SECONDS = env.float("JOB_REFRESH_DEBOUNCE_SECONDS", default=3.0)
# A refresh that has not finished after this many seconds is presumed lost (its worker died): the next
# batch may start another.
JOB_REFRESH_LOCK_SECONDS = env.int("JOB_REFRESH_LOCK_SECONDS", default=600)
# The queue refreshes go to (empty: Celery's default queue; name one to give refreshes their own workers).
JOB_REFRESH_QUEUE = env("JOB_REFRESH_QUEUE", default="") or None
# Hours of succeeded core.refresh_job task runs kept (one per refresh; failures are kept like other runs).
JOB_REFRESH_KEEP_RUNS_HOURS = env.float("JOB_REFRESH_KEEP_RUNS_HOURS", default=2.0)
# Seconds each process reuses its map of host -> running jobs when finding the jobs a batch touches.
JOB_REFRESH_HOST_MAP_SECONDS = env.float("JOB_REFRESH_HOST_MAP_SECONDS", default=10.0)
# Scoring a job from scratch splits it into blocks of this many nodes run in parallel (a Celery chord)
# when it has at least SATURATION_SPLIT_MIN_NODES nodes; smaller jobs are scored in one task.
SATURATION_BLOCK_NODES = env.int("SATURATION_BLOCK_NODES", default=128)
SATURATION_SPLIT_MIN_NODES = env.int("SATURATION_SPLIT_MIN_NODES", default=256)
# A running job's incremental update reads the store again from this many seconds before the end of what
# it scored (the last, possibly partial, bucket and collectors' late batches).
SATURATION_REREAD_SECONDS = env.float("SATURATION_REREAD_SECONDS", default=60.0)

# ---------------------------------------------------------------------------------------------
# The living demo (see apps/core/README.md, "The demo feeder")
# ---------------------------------------------------------------------------------------------
# With the demo loaded, beat runs the demo feeder every DEMO_FEED_SECONDS: new telemetry for the demo's
# running jobs and every node, and jobs moving along their timeline. Never set it in production.
DEMO_FEEDER = env.bool("DEMO_FEEDER", default=False)
DEMO_FEED_SECONDS = env.float("DEMO_FEED_SECONDS", default=30.0)
# Demo seconds per real second (1: real time). The integration test runs the demo faster.
DEMO_CLOCK_SPEED = env.float("DEMO_CLOCK_SPEED", default=1.0)
# `manage.py demo` writes how far its build has come here (apps/core/demo_progress.py): make run serves the
# portal while the demo builds in the background, and the login and home pages show this progress.
DEMO_PROGRESS_FILE = Path(env("DEMO_PROGRESS_FILE", default=str(DATA_DIR / "demo-build.json")))
if DEMO_FEEDER:
    CELERY_BEAT_SCHEDULE["core.feed_demo"] = {"task": "core.feed_demo", "schedule": float(DEMO_FEED_SECONDS)}
