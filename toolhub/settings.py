"""Django settings for toolhub, read from the environment (see .env.example)."""

import os
import secrets
import warnings
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_number(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}.") from exc


DEBUG = env_bool("DJANGO_DEBUG", False)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if DEBUG or env_bool("TOOLHUB_DEV", False):
        warnings.warn("DJANGO_SECRET_KEY is not set: using a random key for this process.", stacklevel=1)
        SECRET_KEY = secrets.token_urlsafe(50)
    else:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or DJANGO_DEBUG=true / TOOLHUB_DEV=true for development).")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Base URL used where an absolute endpoint URL is shown outside a request (empty: from the request).
TOOLHUB_PUBLIC_URL = os.environ.get("TOOLHUB_PUBLIC_URL", "").rstrip("/")

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
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tools_app",
    "mcp_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "toolhub.urls"

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

ASGI_APPLICATION = "toolhub.asgi.application"

_database_url = os.environ.get("DATABASE_URL", "").strip()
if _database_url:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(BASE_DIR / "db.sqlite3")}}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SPEC §3: SQLite must not lose writes either. IMMEDIATE transactions take the write lock at
    # BEGIN, so two writers of one table queue instead of failing on a lock upgrade; WAL lets
    # readers go on while a write is in progress. synchronous=NORMAL is SQLite's advice for WAL: a commit
    # survives a crash of toolhub, and only an OS crash or power loss can lose the last commits; with FULL
    # every call (each is recorded before it answers, issue 7) waited for an fsync: 2x the time per call.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# Only for `collectstatic` deployments; unset, WhiteNoise serves straight from the apps (no missing-folder warning).
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or None
# Serve static files straight from the apps' folders, so no collectstatic step is needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024 * 1024

REST_FRAMEWORK = {
    # Token first: DRF answers 401 (not 403) only when the first class sends WWW-Authenticate (SPEC §6).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "tools_app.api.negotiation.ContentNegotiation",
    "DEFAULT_PARSER_CLASSES": [
        "tools_app.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "tools_app.api.renderers.JSONRenderer",
        "tools_app.api.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "tools_app.api.schema.ToolhubAutoSchema",
    "EXCEPTION_HANDLER": "tools_app.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "tools_app.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "tools_app.api.filters.OrderingFilter",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "toolhub API",
    "DESCRIPTION": "Tables, tools, MCP instances, bindings, API keys and the tool registry.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Per-call evaluation budgets (issue 12; docs/budgets.md has why each default): an MCP instance may override
# the first three (McpInstance.query_cpu_ms, query_max_elements, query_max_bytes); API and admin calls use these.
TOOLHUB_QUERY_CPU_MS = int(env_number("TOOLHUB_QUERY_CPU_MS", 2000))
TOOLHUB_QUERY_MAX_ELEMENTS = int(env_number("TOOLHUB_QUERY_MAX_ELEMENTS", 5_000_000))
TOOLHUB_QUERY_MAX_BYTES = int(env_number("TOOLHUB_QUERY_MAX_BYTES", 64 * 1024 * 1024))
TOOLHUB_QUERY_MAX_LENGTH = int(env_number("TOOLHUB_QUERY_MAX_LENGTH", 10_000))
TOOLHUB_QUERY_MAX_DEPTH = int(env_number("TOOLHUB_QUERY_MAX_DEPTH", 100))
# Expensive calls (past 20 ms of CPU) running at once per API key and per user, in each server process; one
# over it waits up to TOOLHUB_CONCURRENCY_WAIT_MS for a slot, then is refused with RATE_LIMITED.
TOOLHUB_CONCURRENT_CALLS_PER_KEY = int(env_number("TOOLHUB_CONCURRENT_CALLS_PER_KEY", 1))
TOOLHUB_CONCURRENT_CALLS_PER_USER = int(env_number("TOOLHUB_CONCURRENT_CALLS_PER_USER", 2))
TOOLHUB_CONCURRENCY_WAIT_MS = int(env_number("TOOLHUB_CONCURRENCY_WAIT_MS", 100))
# How long a thread may hold the GIL while another waits (sys.setswitchinterval), set by toolhub.asgi; 0 leaves
# Python's default (5 ms).
TOOLHUB_GIL_SWITCH_INTERVAL_MS = env_number("TOOLHUB_GIL_SWITCH_INTERVAL_MS", 1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("TOOLHUB_LOG_LEVEL", "WARNING")},
}
