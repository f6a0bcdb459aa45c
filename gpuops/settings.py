"""Django settings, driven by the environment.

Embedded default (no variables set): SQLite under var/, Celery on kombu's filesystem transport under var/,
a SECRET_KEY generated once into var/. Production sets GPUOPS_ENV=production with DATABASE_URL (PostgreSQL),
CELERY_BROKER_URL (Redis or RabbitMQ), SECRET_KEY and ALLOWED_HOSTS: the block "Production hardening" below then
refuses to start without them and turns on the settings for running behind a TLS proxy (docs/operations.md).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gpuops.private_files import private_file_write

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("GPUOPS_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    # Embedded default: generate once and keep it, so sessions survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        private_file_write(path, secrets.token_urlsafe(50))
    return path.read_text().strip()


# GPUOPS_ENV=production: the hardened block below applies (read first: a production process never generates a key).
GPUOPS_ENV = os.environ.get("GPUOPS_ENV", "").strip().lower()
GPUOPS_PRODUCTION = GPUOPS_ENV == "production"
SECRET_KEY = os.environ.get("SECRET_KEY", "") if GPUOPS_PRODUCTION else _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",  # operator classes in index expressions (cmdb 0007_search_indexes); inert on SQLite
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally: no CDN at run time
    "guardian",
    "django_htmx",
    "cmdb",
    "inventory_agents",
    "workflows",
    "workflows.rollouts",
    "integrations",
    "integrations.switches",
    "integrations.procurement",
    "integrations.warehouse",
    "integrations.monitoring",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Outermost but one: whatever answers an /api/ error below (Django, a plain view) leaves as JSON.
    "gpuops.api.django_errors.ApiErrorEnvelopeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After auth: the change context needs request.user.
    "gpuops.middleware.ChangeContextMiddleware",
]

ROOT_URLCONF = "gpuops.urls"
CSRF_FAILURE_VIEW = "gpuops.api.django_errors.csrf_failure"
WSGI_APPLICATION = "gpuops.wsgi.application"
ASGI_APPLICATION = "gpuops.asgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gpuops.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
    )
}
# A cache every process shares: the token-login throttle counts per client address across all web processes (a
# per-process LocMem cache would allow 30/min per worker). Redis in production (CACHE_URL=redis://host:6379/1);
# the database (a table made by migrate) on the embedded default.
CACHE_URL = os.environ.get("CACHE_URL", "")
if CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "gpuops_cache"}}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the timeout rides out short write locks.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Sign-on (gpuops/signon.py, docs/operations.md#sign-on) ------------------------------------------------------
# Local accounts always; LDAP / Active Directory when GPUOPS_LDAP_SERVER_URI is set (needs the `ldap` extra), OpenID
# Connect when GPUOPS_OIDC_CLIENT_ID is set. Directory groups become roles and scopes through cmdb's
# DirectoryGroupMapping rows at every login.
from gpuops.signon import backends as _signon_backends  # noqa: E402
from gpuops.signon import ldap_settings as _ldap_settings  # noqa: E402
from gpuops.signon import oidc_settings as _oidc_settings  # noqa: E402

GPUOPS_OIDC_ENABLED = False
_LDAP = _ldap_settings(os.environ)
_OIDC = _oidc_settings(os.environ)
globals().update(_LDAP)
globals().update(_OIDC)
AUTHENTICATION_BACKENDS = _signon_backends(ldap_on=bool(_LDAP), oidc_on=bool(_OIDC))
# --- end of sign-on -----------------------------------------------------------------------------------------------

ANONYMOUS_USER_NAME = None  # no guardian anonymous user: nothing is public
GUARDIAN_RAISE_403 = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# GPUOPS_STATIC_ROOT: a container image collects its static files at build time, outside the var volume.
STATIC_ROOT = Path(os.environ.get("GPUOPS_STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/tickets/"

# --- REST framework -------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: a request without credentials gets 401 with `WWW-Authenticate: Token` (DRF takes the header
    # from the first class; session auth has none, which would turn "not logged in" into a 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Every list has the same capped limit (at most 1,000) and cursor mode, and one error envelope.
    "DEFAULT_PAGINATION_CLASS": "gpuops.api.pagination.FleetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "gpuops.api.exceptions.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "TITLE": "gpuops API",
    "DESCRIPTION": "CMDB and ops workflows for GPU datacenters.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Nothing is public (docs/api.md): the schema and the docs need a session or a token, like every endpoint.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    # Several CMDB models have a `kind`/`status`/`role`/`action` with different choices: name each enum after
    # its TextChoices so clients get stable names (NodeStatusEnum, not Status2f7Enum).
    "ENUM_NAME_OVERRIDES": {
        f"{name}Enum": f"cmdb.models.{name}"
        for name in (
            "ClusterKind",
            "TenantKind",
            "PartKind",
            "ComponentKind",
            "NicKind",
            "PlacementKind",
            "FabricKind",
            "StockLocationKind",
            "RackStatus",
            "NodeStatus",
            "SwitchStatus",
            "LinkStatus",
            "PartItemStatus",
            "NodeRole",
            "SwitchRole",
            "HealthAction",
            "ChangeAction",
            "LinkState",
            "AcceleratorLifecycle",
            "Health",
            "Severity",
            "DriverComponent",
            "CableType",
            "FabricPurpose",
            "Interconnect",
            "FormFactor",
            "RackCooling",
            "RackFace",
        )
    }
    # A package installs a driver or a firmware component: its own choice set beside DriverComponent's.
    | {"PackageComponentEnum": "cmdb.models.software.PACKAGE_COMPONENT_CHOICES"},
}

# --- Celery ---------------------------------------------------------------------------------------------------
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("out", "processed", "control"):
        (_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_RESULT_BACKEND = None  # results live in our own rows (step runs, task runs)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# Split by kind so a flood of agent reports cannot starve a rollout.
CELERY_TASK_ROUTES = {
    "inventory_agents.*": {"queue": "ingest"},
    "workflows.*": {"queue": "workflows"},
    "integrations.*": {"queue": "integrations"},
}
CELERY_WORKER_QUEUES = "default,ingest,workflows,integrations"
# The currency of the cost model's prices (docs/capacity.md): a label, no conversion.
GPUOPS_COST_CURRENCY = os.environ.get("GPUOPS_COST_CURRENCY", "USD")

CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE: dict = {
    "cmdb-reservations-expire": {"task": "cmdb.reservations_expire", "schedule": 600.0},
    "cmdb-capacity-rollup": {"task": "cmdb.capacity_rollup", "schedule": 3600.0},
    "switches-poll-all": {"task": "integrations.switches.poll_all", "schedule": 900.0},
    "inventory_agents.flag_stale_nodes": {"task": "inventory_agents.flag_stale_nodes", "schedule": 300.0},
    "inventory_agents.prune_reports": {"task": "inventory_agents.prune_reports", "schedule": 3600.0},
    # A no-op unless GPUOPS_DEMO_AGENTS is set (script/server does): reports for the demo fleet's nodes.
    "inventory_agents.demo_agents_report": {"task": "inventory_agents.demo_agents_report", "schedule": 30.0},
}
# Sign-on: LDAP accounts held against the directory between sign-ons (cmdb.directory_sync; docs/operations.md#sign-on).
if _LDAP:
    CELERY_BEAT_SCHEDULE["cmdb.directory_sync"] = {
        "task": "cmdb.directory_sync",
        "schedule": float(os.environ.get("GPUOPS_LDAP_SYNC_SECONDS", "900")),
    }
# Provisioning burn-in: how long a new node must report healthy before it joins (script/server shortens it).
GPUOPS_ROLLOUTS: dict = {}
if os.environ.get("GPUOPS_BURN_IN_WINDOW_MINUTES"):
    GPUOPS_ROLLOUTS["BURN_IN_WINDOW_MINUTES"] = int(os.environ["GPUOPS_BURN_IN_WINDOW_MINUTES"])
# Provisioning switch ports: diffs only, nothing pushed (script/server sets it; the app default pushes for real).
if os.environ.get("GPUOPS_SWITCH_CONFIG_DRY_RUN"):
    GPUOPS_ROLLOUTS["SWITCH_CONFIG_DRY_RUN"] = env_bool("GPUOPS_SWITCH_CONFIG_DRY_RUN")
# The demo fleet has no machines: stand-in agents report what the CMDB holds (inventory_agents/services/demo_agents).
GPUOPS_DEMO_AGENTS = env_bool("GPUOPS_DEMO_AGENTS")
# The demo fleet has no Slurm either: the no-op scheduler plus a made-up job history that says so.
if env_bool("GPUOPS_DEMO_SCHEDULER"):
    GPUOPS_INTEGRATIONS = {"SCHEDULERS": {"default": "integrations.schedulers.demo.DemoScheduler"}}

# --- Logging --------------------------------------------------------------------------------------------------
# GPUOPS_LOG_FORMAT: "plain" (the default, script/server) writes human lines to stderr; "json" writes one JSON object
# per line to stdout for a log shipper, with a line per HTTP request (gpuops.request), Celery task run (gpuops.task)
# and workflow step (gpuops.step). gpuops/logs.py; docs/operations.md "Logs".
GPUOPS_LOG_FORMAT = os.environ.get("GPUOPS_LOG_FORMAT", "plain").strip().lower() or "plain"
if GPUOPS_LOG_FORMAT not in ("plain", "json"):
    raise ValueError(f"GPUOPS_LOG_FORMAT must be 'plain' or 'json', not {GPUOPS_LOG_FORMAT!r}")
_JSON_LOGS = GPUOPS_LOG_FORMAT == "json"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "gpuops.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
    },
    "root": {"handlers": ["json" if _JSON_LOGS else "console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "gpuops.security": {"level": "INFO"},
        # Plain: the server's own access lines (runserver) are the request lines; ours only for 5xx.
        "gpuops.request": {"level": "INFO" if _JSON_LOGS else "WARNING"},
        # JSON: runserver's access lines and Celery's "Task ... succeeded" would repeat the request and task lines.
        **({"django.server": {"level": "ERROR"}, "celery.app.trace": {"level": "WARNING"}} if _JSON_LOGS else {}),
    },
}
# A Celery worker replaces the root logger's handlers with its own plain ones unless told not to.
CELERY_WORKER_HIJACK_ROOT_LOGGER = not _JSON_LOGS

# --- gpuops ---------------------------------------------------------------------------------------------------
GPUOPS = {
    # Nodes whose agent has not reported for this many minutes are flagged stale.
    "AGENT_STALE_AFTER_MINUTES": int(os.environ.get("GPUOPS_AGENT_STALE_AFTER_MINUTES", "30")),
    "AGENT_REPORT_MAX_BYTES": int(os.environ.get("GPUOPS_AGENT_REPORT_MAX_BYTES", str(2 * 1024 * 1024))),
}

# /metrics (gpuops/observability.py, docs/monitoring.md): a scraper sends `Authorization: Bearer <token>` or comes
# from an allowed network (CIDRs, comma-separated; REMOTE_ADDR). Neither set: /metrics is closed. Fleet gauges
# are cached in the shared cache for CACHE_SECONDS (0: computed at every scrape).
GPUOPS_METRICS_TOKEN = os.environ.get("GPUOPS_METRICS_TOKEN", "")
GPUOPS_METRICS_ALLOW_FROM = env_list("GPUOPS_METRICS_ALLOW_FROM")
GPUOPS_METRICS_CACHE_SECONDS = float(os.environ.get("GPUOPS_METRICS_CACHE_SECONDS", "15"))
GPUOPS_METRICS_BROKER_TIMEOUT_SECONDS = 2.0
# The console dashboard's figures are counted once per scope and reused for DASHBOARD_CACHE_SECONDS (0: counted at
# every view); the page says when they were counted.
GPUOPS_CONSOLE = {
    "DASHBOARD_CACHE_SECONDS": float(os.environ.get("GPUOPS_DASHBOARD_CACHE_SECONDS", "30")),
}
GPUOPS_READYZ_BROKER_TIMEOUT_SECONDS = 2.0

# --- Production hardening (GPUOPS_ENV=production) ---------------------------------------------------------------
# Behind a TLS proxy (deploy/nginx/gpuops.conf). `manage.py check --deploy` reports nothing with the environment of
# deploy/gpuops.env.example (tests/deploy/test_deploy_settings.py runs it).
if GPUOPS_PRODUCTION:
    _refusals = []
    if DEBUG:
        _refusals.append("DEBUG must be false (it shows settings and source in error pages)")
    if len(SECRET_KEY) < 50:
        _refusals.append(
            "SECRET_KEY must be set, 50 characters or more, the same on every web and worker host "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    if "ALLOWED_HOSTS" not in os.environ or not ALLOWED_HOSTS:
        _refusals.append("ALLOWED_HOSTS must name the host names users reach gpuops by (comma-separated)")
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        _refusals.append("DATABASE_URL must point at PostgreSQL (SQLite is the single-machine demo database)")
    if CELERY_BROKER_URL.startswith("filesystem://"):
        _refusals.append("CELERY_BROKER_URL must point at Redis or RabbitMQ (the filesystem broker is one machine's)")
    if _refusals:
        raise ImproperlyConfigured(
            "GPUOPS_ENV=production refuses to start:\n  - " + "\n  - ".join(_refusals) + "\nSee docs/operations.md."
        )
    # The proxy terminates TLS and says so in X-Forwarded-Proto (it must overwrite what the client sent, and
    # gunicorn must be reachable only through it): request.is_secure(), https redirects and absolute URLs follow.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Probes and scrapers talk to gunicorn directly over plain HTTP on the private network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # HSTS: browsers refuse plain HTTP to this host for a year. Start lower (GPUOPS_HSTS_SECONDS=3600) until TLS is
    # known good; `preload` has effect only if the domain is submitted to the browsers' preload list.
    SECURE_HSTS_SECONDS = int(os.environ.get("GPUOPS_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("GPUOPS_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("GPUOPS_HSTS_PRELOAD", True)
    # Unless given, the CSRF-trusted origins are https:// on every allowed host name (".example.com" allows its
    # subdomains: https://*.example.com); a form posted from any other origin is refused.
    if "CSRF_TRUSTED_ORIGINS" not in os.environ:
        CSRF_TRUSTED_ORIGINS = [
            f"https://*{host}" if host.startswith(".") else f"https://{host}" for host in ALLOWED_HOSTS if host != "*"
        ]
    # Reconnect after a database restart or failover instead of failing the first request on a dead connection.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # `check --deploy` answers "is this deployment configured safely"; drf-spectacular would add the OpenAPI
    # schema's naming warnings to it, which are the API tests' business (tests/cmdb/api/test_api_schema.py).
    SPECTACULAR_SETTINGS["ENABLE_DJANGO_DEPLOY_CHECK"] = False

# Extension point for the other apps' settings (adapters, schedules); each app keeps its own defaults.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
