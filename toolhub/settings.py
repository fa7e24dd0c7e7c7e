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

# Rate limits (issue 13, docs/rate-limits.md): requests per window, counted by tools_app.rate_limits.
# REDIS_URL set: counted in Redis, shared by every worker and machine; unset: in each worker's memory.
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
TOOLHUB_RATE_LIMITS_ENABLED = env_bool("TOOLHUB_RATE_LIMITS_ENABLED", True)
TOOLHUB_RATE_LIMIT_KEY_PREFIX = os.environ.get("TOOLHUB_RATE_LIMIT_KEY_PREFIX", "").strip() or "toolhub-rate"
# The rate per scope, '<count>/<period>'; empty: the default in tools_app.rate_limits.DEFAULT_RATES
# (mcp_key and user 600/minute, token 10/minute, anon 60/minute). An MCP instance's `key_rate_limit`
# overrides `mcp_key` for its keys.
TOOLHUB_RATE_LIMITS = {
    "mcp_key": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "").strip(),
    "user": os.environ.get("TOOLHUB_RATE_LIMIT_USER", "").strip(),
    "token": os.environ.get("TOOLHUB_RATE_LIMIT_TOKEN", "").strip(),
    "anon": os.environ.get("TOOLHUB_RATE_LIMIT_ANON", "").strip(),
}

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
    # Per user when authenticated, per IP otherwise; the token endpoint has its own per-IP throttle. The
    # rates are TOOLHUB_RATE_LIMITS (one home for the API and MCP), read per request, so DRF's
    # DEFAULT_THROTTLE_RATES is not used (tools_app/api/throttles.py).
    "DEFAULT_THROTTLE_CLASSES": [
        "tools_app.api.throttles.UserRateThrottle",
        "tools_app.api.throttles.AnonRateThrottle",
    ],
    # Per-IP buckets use the connection's address (REMOTE_ADDR), never a client-sent X-Forwarded-For:
    # behind a reverse proxy, run uvicorn with --proxy-headers --forwarded-allow-ips=<the proxy>.
    "NUM_PROXIES": 0,
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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("TOOLHUB_LOG_LEVEL", "WARNING")},
}
