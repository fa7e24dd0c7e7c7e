"""Django settings for toolhub, read from the environment (see .env.example)."""

import os
import secrets
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

# Every TOOLHUB_* default is written once, there; this module reads the environment.
from tools_app.kernel import limits

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


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """A whole number from the environment; anything else stops toolhub with a message naming the variable."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be a whole number of at least {minimum}, not {value!r}.")
    return number


def env_number(name: str, default: float) -> float:
    """A number (fractions allowed) from the environment; anything else stops toolhub with a message."""
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
    if DEBUG or env_bool("TOOLHUB_DEV", limits.DEV.default):
        warnings.warn("DJANGO_SECRET_KEY is not set: using a random key for this process.", stacklevel=1)
        SECRET_KEY = secrets.token_urlsafe(50)
    else:
        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY (or DJANGO_DEBUG=true / TOOLHUB_DEV=true for development).")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Base URL used where an absolute endpoint URL is shown outside a request (empty: from the request).
TOOLHUB_PUBLIC_URL = os.environ.get("TOOLHUB_PUBLIC_URL", limits.PUBLIC_URL.default).rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",  # Hashed, expiring API tokens (KNOX_TOKEN_MODEL below)
    "axes",  # Lockout after repeated failed logins (AXES_* below)
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tools_app",
    "mcp_app",
    "oauth2_provider",  # OAuth 2.1 authorization server (OAUTH2_PROVIDER below, docs/oauth.md)
    "oauth_app",
]

MIDDLEWARE = [
    # The request's id (X-Request-ID), span and log line; first, so that every answer has them.
    "toolhub.observability.RequestMiddleware",
    "toolhub.request_limits.RequestSizeLimitMiddleware",  # first: refuses a body over the limit unread
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns a login refused for too many failures into the lockout answer (keep it last).
    "axes.middleware.AxesMiddleware",
    # A view whose password check found every hashing slot taken answers 429 (toolhub.passwords).
    "toolhub.lockout.PasswordCheckBusyMiddleware",
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

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A database that does not answer fails a connection attempt after this many seconds, not the
    # operating system's minutes (a ?connect_timeout= in DATABASE_URL wins).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5, minimum=1)
    )

#
# PostgreSQL connection pool (docs/auth.md, "Database connections")
#
# Each worker process holds at most DATABASE_POOL_MAX_SIZE connections (psycopg's pool, through Django's
# OPTIONS["pool"]): a burst of requests waits up to DATABASE_POOL_TIMEOUT seconds for a free connection
# instead of opening one each and exhausting the server's max_connections. Budget:
# workers × DATABASE_POOL_MAX_SIZE (+ management commands) < PostgreSQL's max_connections (default 100).
# Per worker, the MCP database threads (TOOLHUB_MCP_DB_THREADS, 4) each keep one connection for up to a
# second between requests (mcp_app/hops.py) and every API/admin request takes one for its duration.
# The pool needs CONN_MAX_AGE = 0 (a "closed" connection goes back to the pool); CONN_HEALTH_CHECKS makes
# the pool check a connection as it is handed out. DATABASE_POOL_MAX_SIZE=0 turns the pool off (then each
# thread keeps its own connection for 60 s, as before).
DATABASE_POOL_MAX_SIZE = int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10"))
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_MAX_SIZE > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DATABASE_POOL_MAX_SIZE),
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "10")),
        # After a burst the pool shrinks back to min_size: psycopg closes one idle connection per max_idle.
        "max_idle": float(os.environ.get("DATABASE_POOL_MAX_IDLE", "10")),
    }

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SPEC §3: SQLite must not lose writes either. IMMEDIATE transactions take the write lock at
    # BEGIN, so two writers of one table queue instead of failing on a lock upgrade; WAL lets
    # readers go on while a write is in progress. synchronous=NORMAL is SQLite's advice for WAL: a commit
    # survives a crash of toolhub, and only an OS crash or power loss can lose the last commits; with FULL
    # every call (each is recorded before it answers) waited for an fsync: 2x the time per call.
    # cache_size stays SQLite's default (2 MiB a connection): 32 MiB halved the CPU of a filter reading 10,000 of
    # 100,000 records' rows, but a worker serving a 1,000,000-record table then grew 100.7 MiB instead of 38.5
    # (docs/tables-at-scale.md, "Indexes").
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
# "2026-11-27 09:17:43" on every admin page (toolhub/formats/en/formats.py), as toolhub's templates write it.
FORMAT_MODULE_PATH = ["toolhub.formats"]
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# Only for `collectstatic` deployments; unset, WhiteNoise serves straight from the apps (no missing-folder warning).
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or None
# Serve static files straight from the apps' folders, so no collectstatic step is needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

#
# Input limits (docs/input-limits.md): request bodies, table documents, arguments.
#
# TOOLHUB_MAX_REQUEST_BYTES: API and admin request bodies; larger ones get 413 REQUEST_TOO_LARGE before
# Django reads them (toolhub.request_limits). TOOLHUB_MAX_MCP_REQUEST_BYTES: the same for /mcp/<slug>/
# (413 with a JSON-RPC error). Tables: the document's JSON text and its nesting, refused at every write
# with VALIDATION_ERROR. Arguments (and tool schemas): their nesting, refused with INVALID_ARGUMENTS.
TOOLHUB_MAX_REQUEST_BYTES = int(os.environ.get("TOOLHUB_MAX_REQUEST_BYTES", limits.MAX_REQUEST_BYTES.default))
TOOLHUB_MAX_MCP_REQUEST_BYTES = int(
    os.environ.get("TOOLHUB_MAX_MCP_REQUEST_BYTES", limits.MAX_MCP_REQUEST_BYTES.default)
)
TOOLHUB_MAX_TABLE_BYTES = int(os.environ.get("TOOLHUB_MAX_TABLE_BYTES", limits.MAX_TABLE_BYTES.default))
TOOLHUB_MAX_TABLE_DEPTH = int(os.environ.get("TOOLHUB_MAX_TABLE_DEPTH", limits.MAX_TABLE_DEPTH.default))
# Tables whose records are stored as rows (docs/tables-at-scale.md, "Limits"): records per table, the table's JSON
# text (unset: 5 GiB on PostgreSQL, 2 GiB on SQLite), one record's JSON text; over one, VALIDATION_ERROR naming it,
# nothing written. TOOLHUB_MAX_IMPORT_BYTES: the body of POST /api/tables/import/ (read to disk, never held whole),
# which TOOLHUB_MAX_REQUEST_BYTES does not bound.
TOOLHUB_MAX_TABLE_RECORDS = env_int("TOOLHUB_MAX_TABLE_RECORDS", limits.MAX_TABLE_RECORDS.default, minimum=1)
TOOLHUB_MAX_ROWS_TABLE_BYTES = env_int("TOOLHUB_MAX_ROWS_TABLE_BYTES", limits.MAX_ROWS_TABLE_BYTES.default, minimum=0)
TOOLHUB_MAX_RECORD_BYTES = env_int("TOOLHUB_MAX_RECORD_BYTES", limits.MAX_RECORD_BYTES.default, minimum=1)
TOOLHUB_MAX_IMPORT_BYTES = env_int("TOOLHUB_MAX_IMPORT_BYTES", limits.MAX_IMPORT_BYTES.default, minimum=1)
# How a table created with a document (the API's POST, setup apply, the admin's form) is stored: "document", or
# "rows" when its data holds a record collection (docs/tables-at-scale.md, "New tables").
TOOLHUB_NEW_TABLE_STORAGE = os.environ.get("TOOLHUB_NEW_TABLE_STORAGE", limits.NEW_TABLE_STORAGE.default)
# Table record indexes (docs/tables-at-scale.md, "Indexes"): how many fields a table may declare in
# indexed_fields; a read of a rows table slower than TOOLHUB_SLOW_QUERY_MS (in SQL, answered or stopped, or
# streamed) that filters or sorts on an undeclared field is counted (toolhub_slow_queries_total) and its call
# log row suggests declaring it.
TOOLHUB_MAX_INDEXED_FIELDS = env_int("TOOLHUB_MAX_INDEXED_FIELDS", limits.MAX_INDEXED_FIELDS.default, minimum=0)
TOOLHUB_SLOW_QUERY_MS = env_int("TOOLHUB_SLOW_QUERY_MS", int(limits.SLOW_QUERY_MS.default), minimum=0)
# Table imports (POST /api/tables/import/, the admin's file upload) running at once per server process: per
# owner, and in all; one more is refused at once with RATE_LIMITED (tools_app/services/imports.py).
TOOLHUB_IMPORTS_PER_OWNER = env_int("TOOLHUB_IMPORTS_PER_OWNER", limits.IMPORTS_PER_OWNER.default, minimum=1)
TOOLHUB_IMPORTS_PER_WORKER = env_int("TOOLHUB_IMPORTS_PER_WORKER", limits.IMPORTS_PER_WORKER.default, minimum=1)
TOOLHUB_MAX_ARGUMENT_DEPTH = int(os.environ.get("TOOLHUB_MAX_ARGUMENT_DEPTH", limits.MAX_ARGUMENT_DEPTH.default))
# Table history (docs/history.md): a write appends a JSON Patch; after TOOLHUB_TABLE_COMPACT_EVERY
# entries the document is written as a new snapshot. History is kept TOOLHUB_HISTORY_DAYS days OR the last
# TOOLHUB_HISTORY_VERSIONS versions, whichever keeps more; compaction never removes a version inside either.
TOOLHUB_TABLE_COMPACT_EVERY = int(os.environ.get("TOOLHUB_TABLE_COMPACT_EVERY", limits.TABLE_COMPACT_EVERY.default))
TOOLHUB_HISTORY_DAYS = int(os.environ.get("TOOLHUB_HISTORY_DAYS", limits.HISTORY_DAYS.default))
TOOLHUB_HISTORY_VERSIONS = int(os.environ.get("TOOLHUB_HISTORY_VERSIONS", limits.HISTORY_VERSIONS.default))
# Storage quotas (docs/history.md, "Quotas"; 0 = none). History is bounded per table and per owner: over a bound,
# the oldest entries are compacted away after the write (inside the retention above too); history never refuses
# a write. A write that would take an owner's table documents over TOOLHUB_MAX_OWNER_DATA_BYTES is refused
# (QUOTA_EXCEEDED). An entry keeps a call's arguments whole up to TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES.
TOOLHUB_HISTORY_MAX_TABLE_BYTES = env_int("TOOLHUB_HISTORY_MAX_TABLE_BYTES", limits.HISTORY_MAX_TABLE_BYTES.default)
TOOLHUB_HISTORY_MAX_OWNER_BYTES = env_int("TOOLHUB_HISTORY_MAX_OWNER_BYTES", limits.HISTORY_MAX_OWNER_BYTES.default)
TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES = env_int(
    "TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES", limits.HISTORY_MAX_ARGUMENTS_BYTES.default
)
TOOLHUB_MAX_OWNER_DATA_BYTES = env_int("TOOLHUB_MAX_OWNER_DATA_BYTES", limits.MAX_OWNER_DATA_BYTES.default)

# Call details (docs/call-log.md): each call's arguments and result excerpt are kept as JSON of at most these
# bytes (a longer value is cut inside its structure and marked); calls are kept TOOLHUB_CALL_LOG_DAYS days;
# past TOOLHUB_CALL_LOG_OWNER_BYTES of recorded details, an owner's oldest calls lose theirs (metadata stays).
TOOLHUB_CALL_ARGUMENTS_BYTES = int(os.environ.get("TOOLHUB_CALL_ARGUMENTS_BYTES", limits.CALL_ARGUMENTS_BYTES.default))
TOOLHUB_CALL_RESULT_BYTES = int(os.environ.get("TOOLHUB_CALL_RESULT_BYTES", limits.CALL_RESULT_BYTES.default))
TOOLHUB_CALL_LOG_DAYS = int(os.environ.get("TOOLHUB_CALL_LOG_DAYS", limits.CALL_LOG_DAYS.default))
TOOLHUB_CALL_LOG_OWNER_BYTES = int(os.environ.get("TOOLHUB_CALL_LOG_OWNER_BYTES", limits.CALL_LOG_OWNER_BYTES.default))
# Django's own cap on a body it reads into memory (a chunked body, which declares no length): the same limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = TOOLHUB_MAX_REQUEST_BYTES

# Rate limits (docs/rate-limits.md): requests per window, counted by tools_app.kernel.rate_limits.
# REDIS_URL set: counted in Redis, shared by every worker and machine; unset: in each worker's memory.
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
TOOLHUB_RATE_LIMITS_ENABLED = env_bool("TOOLHUB_RATE_LIMITS_ENABLED", limits.RATE_LIMITS_ENABLED.default)
TOOLHUB_RATE_LIMIT_KEY_PREFIX = (
    os.environ.get("TOOLHUB_RATE_LIMIT_KEY_PREFIX", "").strip() or limits.RATE_LIMIT_KEY_PREFIX.default
)
# The rate per scope, '<count>/<period>'; empty: the default in tools_app.kernel.limits.DEFAULT_RATES
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
        "tools_app.api.authentication.TokenAuthentication",  # Hashed, expiring tokens (knox)
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "tools_app.api.negotiation.ContentNegotiation",
    # JSON bodies only (JSON-valued fields and a null `table` have no form encoding); a view that
    # takes a file upload names MultiPartParser itself. The browsable API posts its raw-data form as JSON.
    "DEFAULT_PARSER_CLASSES": ["tools_app.api.parsers.JSONParser"],
    # DRF's test client then sends JSON by default, as every API client must.
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
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

#
# Authentication (docs/auth.md)
#
# API tokens: django-rest-knox's scheme over tools_app.ApiToken, stored as SHA-512 digests. A token expires
# TOOLHUB_API_TOKEN_TTL_HOURS after login (default 168 = 7 days; 0 = never) and stops working when revoked,
# when its user is deactivated and when the password changes.
KNOX_TOKEN_MODEL = "tools_app.ApiToken"
# knox's own AuthToken is swapped out for tools_app.ApiToken: its migrations would still create an unused
# knox_authtoken table (referencing auth_user, which breaks the flush of transactional tests on PostgreSQL).
MIGRATION_MODULES = {"knox": None}
TOOLHUB_API_TOKEN_TTL_HOURS = float(os.environ.get("TOOLHUB_API_TOKEN_TTL_HOURS", limits.API_TOKEN_TTL_HOURS.default))
REST_KNOX = {"TOKEN_PREFIX": "tht_", "AUTH_HEADER_PREFIX": "Token"}
# How long a worker trusts what it last read about an MCP slug when refusing a key that can never be
# valid (404 or 401) without a query (mcp_app/auth.py). Never used to let a request in.
TOOLHUB_AUTH_CACHE_SECONDS = float(os.environ.get("TOOLHUB_AUTH_CACHE_SECONDS", limits.AUTH_CACHE_SECONDS.default))

# Login lockout (django-axes) on the admin login and POST /api/auth/token/: after TOOLHUB_LOGIN_FAILURE_LIMIT
# failed logins (default 5) for one username from one address, that pair is refused (HTTP 429) for
# TOOLHUB_LOGIN_LOCKOUT_MINUTES (default 15; 0 = until unlocked). Superusers see the attempts in the admin
# (Axes section) and unlock by deleting them there, or with `manage.py axes_reset` / `axes_reset_username`.
# The address is REMOTE_ADDR: behind a reverse proxy run uvicorn with --proxy-headers and
# --forwarded-allow-ips so that it is the client's. TOOLHUB_LOGIN_LOCKOUT=false turns the lockout off.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Password hashes (logins, OAuth client secrets) hold no database connection while they run, and at most
# TOOLHUB_PASSWORD_HASHES_PER_MACHINE run at once on this machine, across all worker processes (a lock file
# per slot in TOOLHUB_PASSWORD_HASH_LOCK_DIR); in a request one more is refused at once with RATE_LIMITED (429,
# Retry-After: 1), before Django runs for every endpoint that can hash (toolhub/login_gate.py), so a burst of bad
# logins from any number of addresses neither drains the connection pool nor takes more than that many
# cores (toolhub/passwords.py; docs/auth.md). The previous name, TOOLHUB_PASSWORD_HASHES_PER_WORKER, is
# read when the new one is unset. Django's hashers and stored format, in Django's default order.
PASSWORD_HASHERS = [
    "toolhub.passwords.PBKDF2PasswordHasher",
    "toolhub.passwords.PBKDF2SHA1PasswordHasher",
    "toolhub.passwords.Argon2PasswordHasher",
    "toolhub.passwords.BCryptSHA256PasswordHasher",
    "toolhub.passwords.ScryptPasswordHasher",
    # OAuth client secrets only (OAUTH2_PROVIDER CLIENT_SECRET_HASHER): generated, high entropy, so a fast
    # salted hash; it refuses to hash or check anything else (oauth_app/client_secrets.py). Never first.
    "oauth_app.client_secrets.ClientSecretHasher",
]
TOOLHUB_PASSWORD_HASHES_PER_MACHINE = env_int(
    "TOOLHUB_PASSWORD_HASHES_PER_MACHINE",
    env_int("TOOLHUB_PASSWORD_HASHES_PER_WORKER", limits.PASSWORD_HASHES_PER_MACHINE.default, minimum=1),
    minimum=1,
)
# Empty: <temporary directory>/toolhub-password-hashes-<uid>, shared by every worker of this machine.
TOOLHUB_PASSWORD_HASH_LOCK_DIR = os.environ.get(
    "TOOLHUB_PASSWORD_HASH_LOCK_DIR", limits.PASSWORD_HASH_LOCK_DIR.default
).strip()
# A hash outside a request (createsuperuser, changepassword, a seeding script) waits up to this many seconds for a
# slot, where a request is refused at once.
TOOLHUB_PASSWORD_HASH_WAIT_SECONDS = env_number(
    "TOOLHUB_PASSWORD_HASH_WAIT_SECONDS", limits.PASSWORD_HASH_WAIT_SECONDS.default
)
# A hash runs in a thread at this niceness (19: the lowest CPU priority; 0: the worker's own), so that other
# requests get the cores first.
TOOLHUB_PASSWORD_HASH_NICENESS = env_int("TOOLHUB_PASSWORD_HASH_NICENESS", limits.PASSWORD_HASH_NICENESS.default)
# A worker gives freed memory back to the system (toolhub/memory.py, docs/deploy.md): glibc's arenas capped
# at TOOLHUB_MALLOC_ARENA_MAX (0 = glibc's default of 8 per core), and malloc_trim(0) after a request that
# received and sent TOOLHUB_MALLOC_TRIM_AFTER_BYTES or more (0 = never) and after a burst of requests.
TOOLHUB_MALLOC_ARENA_MAX = env_int("TOOLHUB_MALLOC_ARENA_MAX", limits.MALLOC_ARENA_MAX.default)
TOOLHUB_MALLOC_TRIM_AFTER_BYTES = env_int("TOOLHUB_MALLOC_TRIM_AFTER_BYTES", limits.MALLOC_TRIM_AFTER_BYTES.default)
AXES_ENABLED = env_bool("TOOLHUB_LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = int(os.environ.get("TOOLHUB_LOGIN_FAILURE_LIMIT", "5"))
_lockout_minutes = float(os.environ.get("TOOLHUB_LOGIN_LOCKOUT_MINUTES", "15"))
AXES_COOLOFF_TIME = timedelta(minutes=_lockout_minutes) if _lockout_minutes > 0 else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "toolhub.lockout.lockout_response"
AXES_SENSITIVE_PARAMETERS = ["password"]

SPECTACULAR_SETTINGS = {
    "TITLE": "toolhub API",
    "DESCRIPTION": "Tables, tools, MCP instances, bindings, API keys and the tool registry.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies get their own components (ToolRequest, PatchedToolRequest, ...), where the
    # constraints the server checks on input live; tools_app.api.schema completes them after generation.
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "tools_app.api.schema.postprocess_schema",
    ],
}

#
# Deployment: TLS, security headers, production guards (docs/deploy.md).
#
# "Production settings" are: DJANGO_DEBUG and TOOLHUB_DEV off, DJANGO_SECRET_KEY set (at least 50
# random characters), DJANGO_ALLOWED_HOSTS naming the public host, and TOOLHUB_HTTPS=1 when toolhub is
# reached over TLS. Under them `manage.py check --deploy` reports no issues (.ci/run checks it).
#
# Development mode (seed_demo runs, the login page shows the demo login): DEBUG or TOOLHUB_DEV.
TOOLHUB_DEV = env_bool("TOOLHUB_DEV", limits.DEV.default)

# The one switch for deployments behind TLS: secure cookies, HSTS, redirect of plain HTTP to HTTPS.
TOOLHUB_HTTPS = env_bool("TOOLHUB_HTTPS", False)
if TOOLHUB_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = env_int("TOOLHUB_HSTS_SECONDS", 31_536_000)  # one year
    # Both default on, as check --deploy asks; turning one off is an explicit choice (say, a subdomain
    # still served over plain HTTP), so its reminder (W005 / W021) is silenced with it.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TOOLHUB_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("TOOLHUB_HSTS_PRELOAD", True)
    SILENCED_SYSTEM_CHECKS = [
        check
        for check, chosen in (("security.W005", SECURE_HSTS_INCLUDE_SUBDOMAINS), ("security.W021", SECURE_HSTS_PRELOAD))
        if not chosen
    ]
# Behind a proxy that terminates TLS on another host: the header it sets on HTTPS requests, e.g.
# "X-Forwarded-Proto" (value "https"). Only when the proxy always sets or overwrites it, or a client
# could claim HTTPS. uvicorn already trusts X-Forwarded-Proto from --forwarded-allow-ips (default
# 127.0.0.1), so a proxy on the same machine needs nothing here.
_proxy_ssl_header = os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
if _proxy_ssl_header:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")

# Headers on every page (HTTP too): no referrer to other sites, no framing by any site.
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Content-Security-Policy (django-csp 4): scripts only from toolhub's own static files (no inline script
# anywhere: the API docs use drf-spectacular's split view); <style> elements only from files or with the
# request's nonce (the templates that have one add it: templates/rest_framework/api.html,
# templates/drf_spectacular/swagger_ui.html); style="" attributes are allowed (DRF's browsable API is
# full of them; they cannot run code). tests/browser/test_csp.py loads the admin, try-it, the API docs
# and the browsable API and fails on any violation.
INSTALLED_APPS.append("csp")
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "csp.middleware.CSPMiddleware")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, NONCE],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        **({"upgrade-insecure-requests": True} if TOOLHUB_HTTPS else {}),
    },
}

# register_tool (the registry tool agents call over MCP) refuses to take an owner past this many tools,
# of any type (REGISTRATION_FAILED naming the quota).
TOOLHUB_MAX_TOOLS_PER_OWNER = env_int("TOOLHUB_MAX_TOOLS_PER_OWNER", limits.MAX_TOOLS_PER_OWNER.default)
# An MCP instance serves at most this many prompts of its owner's: prompts/list reads them all.
TOOLHUB_MAX_PROMPTS_PER_INSTANCE = env_int("TOOLHUB_MAX_PROMPTS_PER_INSTANCE", limits.MAX_PROMPTS_PER_INSTANCE.default)
# The change guard (docs/setup.md): a table, tool, binding or instance called in the last this many days is in
# use (as is one bound and enabled on an enabled instance); deleting or renaming it needs a confirmation.
TOOLHUB_IN_USE_DAYS = env_int("TOOLHUB_IN_USE_DAYS", limits.IN_USE_DAYS.default)

# Per-call evaluation budgets (docs/budgets.md has why each default): an MCP instance may override
# the first three (McpInstance.query_cpu_ms, query_max_elements, query_max_bytes); API and admin calls use these.
TOOLHUB_QUERY_CPU_MS = env_int("TOOLHUB_QUERY_CPU_MS", limits.QUERY_CPU_MS.default)
TOOLHUB_QUERY_MAX_ELEMENTS = env_int("TOOLHUB_QUERY_MAX_ELEMENTS", limits.QUERY_MAX_ELEMENTS.default)
TOOLHUB_QUERY_MAX_BYTES = env_int("TOOLHUB_QUERY_MAX_BYTES", limits.QUERY_MAX_BYTES.default)
TOOLHUB_QUERY_MAX_LENGTH = env_int("TOOLHUB_QUERY_MAX_LENGTH", limits.QUERY_MAX_LENGTH.default)
TOOLHUB_QUERY_MAX_DEPTH = env_int("TOOLHUB_QUERY_MAX_DEPTH", limits.QUERY_MAX_DEPTH.default)
# Expensive calls (past 20 ms of CPU) running at once per API key and per user, in each server process; one
# over it waits up to TOOLHUB_CONCURRENCY_WAIT_MS for a slot, then is refused with RATE_LIMITED.
TOOLHUB_CONCURRENT_CALLS_PER_KEY = env_int("TOOLHUB_CONCURRENT_CALLS_PER_KEY", limits.CONCURRENT_CALLS_PER_KEY.default)
TOOLHUB_CONCURRENT_CALLS_PER_USER = env_int(
    "TOOLHUB_CONCURRENT_CALLS_PER_USER", limits.CONCURRENT_CALLS_PER_USER.default
)
TOOLHUB_CONCURRENCY_WAIT_MS = env_int("TOOLHUB_CONCURRENCY_WAIT_MS", limits.CONCURRENCY_WAIT_MS.default)
# TOOLHUB_PREPARED_STATEMENTS: a tools/call's lookup is a prepared statement on PostgreSQL (tools_app.kernel.prepared);
# false behind a pooler in transaction mode that does not keep prepared statements.
TOOLHUB_PREPARED_STATEMENTS = env_bool("TOOLHUB_PREPARED_STATEMENTS", limits.PREPARED_STATEMENTS.default)
# Processes per server process that run reads once they turn expensive (tools_app/execution/heavy.py), so that they do
# not share the server's interpreter lock with light calls; 0 keeps them in the server process. Each worker's
# address space is capped at TOOLHUB_HEAVY_WORKER_MEMORY_MB (0: no cap). docs/budgets.md.
TOOLHUB_MCP_DB_THREADS = env_int("TOOLHUB_MCP_DB_THREADS", limits.MCP_DB_THREADS.default)
TOOLHUB_HEAVY_WORKERS = env_int("TOOLHUB_HEAVY_WORKERS", limits.HEAVY_WORKERS.default)
TOOLHUB_HEAVY_WORKER_MEMORY_MB = env_int("TOOLHUB_HEAVY_WORKER_MEMORY_MB", limits.HEAVY_WORKER_MEMORY_MB.default)
# The parsed table documents each process (a server worker, a heavy worker) keeps, bounded by their JSON text in
# bytes (a parsed document takes about 4.5 times that in memory); the least recently read go first, and a document
# larger than the whole bound is read without being kept. 0: none is kept. docs/budgets.md.
TOOLHUB_TABLE_CACHE_BYTES = env_int("TOOLHUB_TABLE_CACHE_BYTES", limits.TABLE_CACHE_BYTES.default, minimum=0)
# How long a thread may hold the GIL while another waits (sys.setswitchinterval), set by toolhub.asgi; 0 leaves
# Python's default (5 ms). 0.1 ms: a light call waits that long, not 1 ms, at each of its GIL hand-offs while
# an expensive evaluation runs; tools/call throughput measured the same (docs/budgets.md).
TOOLHUB_GIL_SWITCH_INTERVAL_MS = env_number("TOOLHUB_GIL_SWITCH_INTERVAL_MS", limits.GIL_SWITCH_INTERVAL_MS.default)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("TOOLHUB_LOG_LEVEL", "WARNING")},
}

#
# Operations (docs/operations.md): /healthz, /readyz, /metrics, traces and JSON logs.
#
# TOOLHUB_JSON_LOGS: one JSON line per request (logger toolhub.requests) and per tool call (toolhub.calls)
# on standard error. TOOLHUB_METRICS_TOKEN: the bearer token a Prometheus scraper sends to /metrics (unset:
# only a superuser's session reads it). Traces: the standard OTEL_* variables (tools_app.kernel.telemetry).
TOOLHUB_JSON_LOGS = env_bool("TOOLHUB_JSON_LOGS", limits.JSON_LOGS.default)
TOOLHUB_METRICS_TOKEN = os.environ.get("TOOLHUB_METRICS_TOKEN", limits.METRICS_TOKEN.default).strip()
# Error bodies carry the request's id as `request_id` (API errors, MCP error data); the X-Request-ID header is
# always sent. The test suite turns this off (toolhub/testenv.py) so that its exact comparisons of error bodies hold.
TOOLHUB_REQUEST_ID_IN_ERRORS = env_bool("TOOLHUB_REQUEST_ID_IN_ERRORS", limits.REQUEST_ID_IN_ERRORS.default)
if TOOLHUB_JSON_LOGS:
    LOGGING["formatters"] = {"bare": {"format": "%(message)s"}}
    LOGGING["handlers"] = {
        "console": {"class": "logging.StreamHandler"},
        "json_lines": {"class": "logging.StreamHandler", "formatter": "bare"},
    }
    LOGGING["loggers"] = {
        name: {"handlers": ["json_lines"], "level": "INFO", "propagate": False}
        for name in ("toolhub.requests", "toolhub.calls")
    }

# Result budgets (docs/paging.md): the largest result, as compact JSON bytes, a call without an MCP
# instance returns (the API's call endpoint, the admin's try-it; an MCP instance has its own
# max_result_bytes); a list over it comes in pages. The admin's "show all" goes up to the hard cap.
TOOLHUB_MAX_RESULT_BYTES = int(os.environ.get("TOOLHUB_MAX_RESULT_BYTES", limits.MAX_RESULT_BYTES.default))
TOOLHUB_TRY_IT_SHOW_ALL_BYTES = int(
    os.environ.get("TOOLHUB_TRY_IT_SHOW_ALL_BYTES", limits.TRY_IT_SHOW_ALL_BYTES.default)
)

#
# OAuth 2.1 for remote MCP clients (docs/oauth.md): django-oauth-toolkit is the authorization
# server, each MCP instance endpoint is a protected resource (RFC 9728). Tokens are audience-bound (RFC 8707)
# to one instance endpoint; scopes: tools:read (tools that change no data) and tools:all.
#
TOOLHUB_OAUTH_ENABLED = env_bool("TOOLHUB_OAUTH_ENABLED", limits.OAUTH_ENABLED.default)
# Client ID Metadata Documents (the client_id is an https URL toolhub fetches) and Dynamic Client
# Registration (RFC 7591), each switchable.
TOOLHUB_OAUTH_CIMD = env_bool("TOOLHUB_OAUTH_CIMD", True)
TOOLHUB_OAUTH_DCR = env_bool("TOOLHUB_OAUTH_DCR", True)
# Origins ("host:port") whose metadata documents may be fetched although they resolve to a loopback or
# private address, with TOOLHUB_OAUTH_CIMD_CA_FILE as the trusted CA: for tests only, never in production.
TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS = env_list(
    "TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS", list(limits.OAUTH_CIMD_TRUSTED_ORIGINS.default)
)
# Bounds of dynamic registration, open to anyone (oauth_app/registration.py): the body, the redirect URIs of one
# client, each string field; registered clients no owner approved yet (at most this many wait), and how long
# one registered by DCR or a metadata document is kept unapproved before it is deleted.
TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES = env_int(
    "TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES", limits.OAUTH_DCR_MAX_BODY_BYTES.default, minimum=1024
)
TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS = env_int(
    "TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS", limits.OAUTH_DCR_MAX_REDIRECT_URIS.default, minimum=1
)
TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS = env_int(
    "TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS", limits.OAUTH_DCR_MAX_FIELD_CHARS.default, minimum=100
)
TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS = env_int(
    "TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS", limits.OAUTH_DCR_MAX_UNUSED_CLIENTS.default, minimum=1
)
TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS = env_number(
    "TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS", limits.OAUTH_UNUSED_CLIENT_HOURS.default
)
TOOLHUB_OAUTH_CIMD_CA_FILE = os.environ.get("TOOLHUB_OAUTH_CIMD_CA_FILE", limits.OAUTH_CIMD_CA_FILE.default)
OAUTH2_PROVIDER = {
    "SCOPES": {
        "tools:read": "Call the instance's tools that change no data",
        "tools:all": "Call every tool of the instance, including those that create, update or delete data",
    },
    "DEFAULT_SCOPES": ["tools:read"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("TOOLHUB_OAUTH_ACCESS_TOKEN_SECONDS", 3600, minimum=60),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int("TOOLHUB_OAUTH_REFRESH_TOKEN_DAYS", 30, minimum=1) * 86400,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_GENERATOR": "oauth_app.tokens.access_token",
    "REFRESH_TOKEN_GENERATOR": "oauth_app.tokens.refresh_token",
    "OAUTH2_VALIDATOR_CLASS": "oauth_app.validators.ToolhubValidator",
    # Client secrets: `ths_` + 256 random bits, stored with a fast salted HMAC-SHA256 (not the user-password
    # hasher: nothing can guess such a secret, and a slow hash would cost a hashing slot per check).
    "CLIENT_SECRET_GENERATOR_CLASS": "oauth_app.client_secrets.ClientSecretGenerator",
    "CLIENT_SECRET_HASHER": "client_secret_sha256",
    # RFC 9700 gates, all on: S256 only, iss in the authorization response (RFC 9207), tokens stored as
    # SHA-256 checksums, no implicit or password grant, no token in a query string.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # https redirect URIs; oauth_app.models.Client adds http for native clients' loopback callbacks only
    # (RFC 8252: VS Code, Claude Code, the SDK), which oauth_app.validators enforces.
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    "CIMD_ENABLED": TOOLHUB_OAUTH_ENABLED and TOOLHUB_OAUTH_CIMD,
    "CIMD_METADATA_FETCHER": "oauth_app.cimd.ToolhubMetadataFetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": env_number("TOOLHUB_OAUTH_CIMD_TIMEOUT_SECONDS", 3),
    "CIMD_MAX_DOCUMENT_SIZE": env_int("TOOLHUB_OAUTH_CIMD_MAX_BYTES", 16 * 1024, minimum=512),
    # Fetches in flight per worker; one more is refused at once (the client is unknown), never queued.
    "CIMD_MAX_CONCURRENT_FETCHES": env_int("TOOLHUB_OAUTH_CIMD_MAX_FETCHES", 10, minimum=1),
    "DCR_ENABLED": TOOLHUB_OAUTH_ENABLED and TOOLHUB_OAUTH_DCR,
    # MCP clients register before anyone logs in; a registration grants nothing until the owner consents.
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
}
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth_app.Client"
