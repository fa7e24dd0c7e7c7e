"""THE home of every limit and default toolhub reads from its settings: one line per setting, with its name,
default, unit and meaning, and one way to read it.

The environment sets them (toolhub/settings.py reads each variable and takes its default from here); a test or
a deployment may change a setting at run time, so a value is read when it is checked, never at import: the
first check reads it from the settings and keeps it until Django's `setting_changed` signal (override_settings,
pytest-django's `settings` fixture) says a setting changed, since a limit is checked several times on every
call's path. A setting removed without that signal (pytest-django's `del settings.X` sends none) is seen after
`forget_reads()` (the test suite calls it around every test). Every
module that needs a limit imports its reader from here: no other module reads a TOOLHUB_* setting, and no
default is written twice (tools_app/tests/kernel/test_limits.py checks both, and that docs/input-limits.md and
docs/budgets.md give the defaults written here).

    MAX_TABLE_BYTES.get()      the value, read from django.conf.settings now (the default when unset), at least
                               its floor when it has one
    max_table_bytes()          the same, by the name the modules that check it use
    LIMITS                     every setting by name (the test, docs)

A `Limit` is a whole number, a `Measure` a number that may hold a fraction, a `Switch` on or off, a `Text`
a string; the rates of the rate limiter are `RATE_LIMITS`, a scope's rate by scope.

Not here: the variables toolhub/settings.py hands to a library under the library's own setting (the login
lockout's AXES_*, SECURE_HSTS_*, the OAuth token lifetimes and metadata fetches of OAUTH2_PROVIDER), which no
module of toolhub reads; their defaults are written once, there.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from django.core.signals import setting_changed

__all__ = [
    "LIMITS",
    "Limit",
    "Measure",
    "Setting",
    "Switch",
    "Text",
    "default_max_result_bytes",
    "forget_reads",
    "max_argument_depth",
    "max_evaluated_bytes",
    "max_import_bytes",
    "max_indexed_fields",
    "max_owner_data_bytes",
    "max_record_bytes",
    "max_rows_table_bytes",
    "max_table_bytes",
    "max_table_depth",
    "max_table_records",
    "history_max_arguments_bytes",
    "history_max_owner_bytes",
    "history_max_table_bytes",
    "rates",
    "show_all_max_bytes",
]

T = TypeVar("T")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@functools.cache
def _settings() -> Any:
    """django.conf's lazy settings object, imported on first use (then kept: a limit is read on every call's path).
    Imported here, not at the top: toolhub/settings.py imports this module for its defaults while it is being
    loaded, and the type checker's Django plugin cannot follow that cycle."""
    from django.conf import settings

    return settings


# What each setting read as since the settings last changed, by (setting, how it was read): `raw` and `get` keep
# their own. Replaced whole when a setting changes, so a read that began before the change stores its value
# into the dict being dropped, never into the new one.
_read: dict[tuple[str, str], Any] = {}


def forget_reads(**kwargs: Any) -> None:
    """Every value is read from the settings again at its next check: Django's setting_changed receiver, and
    what a test calls where a setting may have changed without that signal."""
    global _read
    _read = {}


setting_changed.connect(forget_reads, dispatch_uid="toolhub.kernel.limits")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One TOOLHUB_* setting: its name, its default, the unit of its value and what it bounds or sets."""

    setting: str
    default: Any
    unit: str
    meaning: str

    # Both readers look the value up by subscript, not dict.get: a read is on every call's path several times,
    # and a subscript that finds its key costs no call.

    def raw(self) -> Any:
        """The setting as configured now (its default when the settings do not define it)."""
        read, key = _read, (self.setting, "raw")
        try:
            return read[key]
        except KeyError:
            value = read[key] = getattr(_settings(), self.setting, self.default)
            return value

    def get(self) -> T:
        """The setting as its kind reads it (_convert), kept until a setting changes (the module docstring)."""
        read, key = _read, (self.setting, "get")
        try:
            return read[key]
        except KeyError:
            value = read[key] = self._convert(getattr(_settings(), self.setting, self.default))
            return value

    def _convert(self, value: Any) -> T:
        return value


@dataclass(frozen=True)
class Limit(Setting[int]):
    """A whole number; a smaller configured value reads as `floor` when there is one."""

    default: int
    floor: int | None = field(default=None, kw_only=True)

    def _convert(self, value: Any) -> int:
        value = int(value)
        return value if self.floor is None else max(self.floor, value)


@dataclass(frozen=True)
class Measure(Setting[float]):
    """A number that may hold a fraction (milliseconds, hours); a smaller one reads as `floor` when there is one."""

    default: float
    floor: float | None = field(default=None, kw_only=True)

    def _convert(self, value: Any) -> float:
        value = float(value)
        return value if self.floor is None else max(self.floor, value)


@dataclass(frozen=True)
class Switch(Setting[bool]):
    default: bool

    def _convert(self, value: Any) -> bool:
        return bool(value)


@dataclass(frozen=True)
class Text(Setting[str]):
    default: str

    def _convert(self, value: Any) -> str:
        return str(value or "")


#
# Request bodies and tables (docs/input-limits.md)
#

MAX_REQUEST_BYTES = Limit(
    "TOOLHUB_MAX_REQUEST_BYTES", 64 * MiB, "bytes", "an API or admin request body (413 REQUEST_TOO_LARGE over it)"
)
MAX_MCP_REQUEST_BYTES = Limit("TOOLHUB_MAX_MCP_REQUEST_BYTES", 4 * MiB, "bytes", "a POST body an MCP endpoint reads")
# The import's body admits the file of the largest table stored as rows (5 GiB of JSON on PostgreSQL) with room
# for the multipart envelope; a file over the engine's rows-table limit is still refused before it is decoded.
MAX_IMPORT_BYTES = Limit(
    "TOOLHUB_MAX_IMPORT_BYTES",
    6 * GiB,
    "bytes",
    "the body of POST /api/tables/import/ (read to disk), instead of TOOLHUB_MAX_REQUEST_BYTES",
)
MAX_TABLE_BYTES = Limit(
    "TOOLHUB_MAX_TABLE_BYTES", 50 * MiB, "bytes", "a table document, as the JSON text written to the database"
)
MAX_TABLE_DEPTH = Limit("TOOLHUB_MAX_TABLE_DEPTH", 64, "levels", "how many objects/arrays deep a table document nests")
MAX_ARGUMENT_DEPTH = Limit(
    "TOOLHUB_MAX_ARGUMENT_DEPTH", 100, "levels", "how deep a tool call's arguments (and a tool's schemas) nest"
)
# Tables stored as rows (docs/tables-at-scale.md, "Limits"): the document cap above does not apply to them.
MAX_TABLE_RECORDS = Limit(
    "TOOLHUB_MAX_TABLE_RECORDS", 10_000_000, "records", "the records of a table stored as rows, over its collections"
)
MAX_ROWS_TABLE_BYTES = Limit(
    "TOOLHUB_MAX_ROWS_TABLE_BYTES",
    0,
    "bytes",
    "the JSON text of a table stored as rows, records included (0: ROWS_TABLE_BYTES_BY_ENGINE)",
)
# The figures measured in docs/tables-at-scale.md, "Limits".
ROWS_TABLE_BYTES_BY_ENGINE = {"postgresql": 5 * GiB, "sqlite": 2 * GiB}
MAX_RECORD_BYTES = Limit("TOOLHUB_MAX_RECORD_BYTES", 1 * MiB, "bytes", "one record of a table stored as rows, as JSON")
# An owner's quota admits two tables at the rows-table limit on PostgreSQL: with the defaults, a table the
# per-table limits take is never refused by the quota alone.
MAX_OWNER_DATA_BYTES = Limit(
    "TOOLHUB_MAX_OWNER_DATA_BYTES", 10 * GiB, "bytes", "one owner's table documents together (0: no quota)", floor=0
)
MAX_INDEXED_FIELDS = Limit(
    "TOOLHUB_MAX_INDEXED_FIELDS", 16, "fields", "record fields one table may list in `indexed_fields`", floor=0
)
IMPORTS_PER_OWNER = Limit("TOOLHUB_IMPORTS_PER_OWNER", 1, "imports", "imports of one owner at once, per process")
IMPORTS_PER_WORKER = Limit("TOOLHUB_IMPORTS_PER_WORKER", 2, "imports", "imports at once in one server process")
MAX_EVALUATED_BYTES = Limit(
    "TOOLHUB_MAX_EVALUATED_BYTES", 50 * MiB, "bytes", "record JSON a read of a rows table evaluates in the server"
)
SLOW_QUERY_MS = Measure(
    "TOOLHUB_SLOW_QUERY_MS",
    200,
    "ms",
    "a read of a rows table (in SQL, answered or stopped, or streamed) slower than this, on an unindexed field,"
    " is reported",
)

#
# History and the call log (docs/history.md, docs/call-log.md)
#

TABLE_COMPACT_EVERY = Limit(
    "TOOLHUB_TABLE_COMPACT_EVERY",
    1000,
    "entries",
    "history entries after the snapshot that fold into a new one",
    floor=1,
)
# At least a day: idempotency keys are answered for 24 h.
HISTORY_DAYS = Limit("TOOLHUB_HISTORY_DAYS", 30, "days", "history kept this long (or HISTORY_VERSIONS)", floor=1)
HISTORY_VERSIONS = Limit(
    "TOOLHUB_HISTORY_VERSIONS", 1000, "versions", "the last versions of a table kept (or HISTORY_DAYS)", floor=0
)
HISTORY_MAX_TABLE_BYTES = Limit(
    "TOOLHUB_HISTORY_MAX_TABLE_BYTES", 100 * MiB, "bytes", "the history one table keeps (0: no bound)", floor=0
)
HISTORY_MAX_OWNER_BYTES = Limit(
    "TOOLHUB_HISTORY_MAX_OWNER_BYTES",
    500 * MiB,
    "bytes",
    "the history of one owner's tables together (0: no quota)",
    floor=0,
)
HISTORY_MAX_ARGUMENTS_BYTES = Limit(
    "TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES", 4 * KiB, "bytes", "a call's arguments a history entry keeps whole", floor=0
)
CALL_ARGUMENTS_BYTES = Limit(
    "TOOLHUB_CALL_ARGUMENTS_BYTES", 4 * KiB, "bytes", "a call's recorded arguments in the call log", floor=256
)
CALL_RESULT_BYTES = Limit(
    "TOOLHUB_CALL_RESULT_BYTES", 4 * KiB, "bytes", "a call's recorded result excerpt in the call log", floor=256
)
CALL_LOG_DAYS = Limit("TOOLHUB_CALL_LOG_DAYS", 30, "days", "how long a call stays in the call log", floor=1)
CALL_LOG_OWNER_BYTES = Limit(
    "TOOLHUB_CALL_LOG_OWNER_BYTES", 64 * MiB, "bytes", "the recorded details one owner's call log keeps", floor=1
)

#
# Results (docs/paging.md)
#

# 40,000 bytes of JSON is about 10,000-16,000 tokens (2.5-4 bytes per token), under the 25,000-token cap and the
# 50,000-character spill-to-file threshold common MCP clients apply to one result.
MAX_RESULT_BYTES = Limit(
    "TOOLHUB_MAX_RESULT_BYTES", 40_000, "bytes", "a read's result without an instance's max_result_bytes"
)
TRY_IT_SHOW_ALL_BYTES = Limit(
    "TOOLHUB_TRY_IT_SHOW_ALL_BYTES", 5_000_000, "bytes", 'the admin try-it\'s "show all": a hard cap'
)
MCP_PAGE_SIZE = Limit("TOOLHUB_MCP_PAGE_SIZE", 100, "items", "items of one page of an MCP list")
ADMIN_EDITOR_MAX_CHARS = Limit(
    "TOOLHUB_ADMIN_EDITOR_MAX_CHARS",
    1_000_000,
    "characters",
    "a table's JSON the admin edits in place (above: a read-only summary)",
)

#
# Call budgets and isolation (docs/budgets.md)
#

QUERY_CPU_MS = Limit("TOOLHUB_QUERY_CPU_MS", 2000, "ms", "CPU time of one call's evaluation")
QUERY_MAX_ELEMENTS = Limit(
    "TOOLHUB_QUERY_MAX_ELEMENTS", 5_000_000, "elements", "elements one evaluation builds or iterates"
)
QUERY_MAX_BYTES = Limit("TOOLHUB_QUERY_MAX_BYTES", 64 * MiB, "bytes", "the logical JSON size of a value walked whole")
QUERY_MAX_LENGTH = Limit("TOOLHUB_QUERY_MAX_LENGTH", 10_000, "characters", "a JMESPath expression")
QUERY_MAX_DEPTH = Limit("TOOLHUB_QUERY_MAX_DEPTH", 100, "levels", "the depth of a parsed JMESPath expression")
CONCURRENT_CALLS_PER_KEY = Limit(
    "TOOLHUB_CONCURRENT_CALLS_PER_KEY", 1, "calls", "expensive calls of one API key at once, per process"
)
CONCURRENT_CALLS_PER_USER = Limit(
    "TOOLHUB_CONCURRENT_CALLS_PER_USER", 2, "calls", "expensive calls of one user at once, per process"
)
CONCURRENCY_WAIT_MS = Limit(
    "TOOLHUB_CONCURRENCY_WAIT_MS", 100, "ms", "how long an expensive call waits for a slot before RATE_LIMITED"
)
HEAVY_WORKERS = Limit("TOOLHUB_HEAVY_WORKERS", 1, "processes", "heavy worker processes per server process (0: none)")
HEAVY_WORKER_MEMORY_MB = Limit(
    "TOOLHUB_HEAVY_WORKER_MEMORY_MB", 2048, "MiB", "a heavy worker's address space (0: no cap)"
)
MCP_DB_THREADS = Limit("TOOLHUB_MCP_DB_THREADS", 4, "threads", "threads per process doing the MCP database work")
PREPARED_STATEMENTS = Switch(
    "TOOLHUB_PREPARED_STATEMENTS", True, "on/off", "whether PostgreSQL keeps a tools/call's lookup prepared"
)
GIL_SWITCH_INTERVAL_MS = Measure(
    "TOOLHUB_GIL_SWITCH_INTERVAL_MS", 0.1, "ms", "how long a busy thread keeps the interpreter (0: Python's 5 ms)"
)
# A parsed document takes about 4.5 times its JSON text in memory (bench/README.md, "Table cache"): the default keeps
# the largest document table (TOOLHUB_MAX_TABLE_BYTES) cached, in about 290 MiB of a process.
TABLE_CACHE_BYTES = Limit(
    "TOOLHUB_TABLE_CACHE_BYTES",
    64 * MiB,
    "bytes",
    "the JSON text of the parsed table documents one process caches (a larger document is not cached)",
    floor=0,
)

#
# Quotas and ownership
#

MAX_TOOLS_PER_OWNER = Limit("TOOLHUB_MAX_TOOLS_PER_OWNER", 1000, "tools", "tools one owner may register")
MAX_PROMPTS_PER_INSTANCE = Limit("TOOLHUB_MAX_PROMPTS_PER_INSTANCE", 100, "prompts", "prompts of one MCP instance")
IN_USE_DAYS = Limit(
    "TOOLHUB_IN_USE_DAYS", 7, "days", "a call this recent makes what it called in use (0: only bindings)", floor=0
)

#
# Rate limits (docs/rate-limits.md)
#

# The kinds of bucket, and the keys of settings.TOOLHUB_RATE_LIMITS holding their rates.
DEFAULT_RATES = {"mcp_key": "600/minute", "user": "600/minute", "anon": "60/minute", "token": "10/minute"}
RATE_LIMITS: Setting[Any] = Setting(
    "TOOLHUB_RATE_LIMITS", DEFAULT_RATES, "rate per scope", "'<count>/<period>' by scope; empty: DEFAULT_RATES"
)
RATE_LIMITS_ENABLED = Switch("TOOLHUB_RATE_LIMITS_ENABLED", True, "on/off", "whether request rates are limited")
RATE_LIMIT_KEY_PREFIX = Text(
    "TOOLHUB_RATE_LIMIT_KEY_PREFIX", "toolhub-rate", "text", "the prefix of the rate limiter's Redis keys"
)

#
# Authentication and the server process
#

API_TOKEN_TTL_HOURS = Measure(
    "TOOLHUB_API_TOKEN_TTL_HOURS", 168, "hours", "how long a new API token lives (0: no expiry)"
)
AUTH_CACHE_SECONDS = Measure(
    "TOOLHUB_AUTH_CACHE_SECONDS", 5, "seconds", "how long an MCP key's authentication hint is kept"
)
PASSWORD_HASHES_PER_MACHINE = Limit(
    "TOOLHUB_PASSWORD_HASHES_PER_MACHINE", 1, "hashes", "password hashes computed at once on this machine", floor=1
)
PASSWORD_HASH_NICENESS = Limit("TOOLHUB_PASSWORD_HASH_NICENESS", 19, "nice", "the scheduling priority of a hash")
PASSWORD_HASH_WAIT_SECONDS = Measure(
    "TOOLHUB_PASSWORD_HASH_WAIT_SECONDS", 30, "seconds", "how long a hash outside a request waits for a slot", floor=0.0
)
MALLOC_ARENA_MAX = Limit("TOOLHUB_MALLOC_ARENA_MAX", 2, "arenas", "glibc malloc arenas (0: glibc's default)")
MALLOC_TRIM_AFTER_BYTES = Limit(
    "TOOLHUB_MALLOC_TRIM_AFTER_BYTES", 1 * MiB, "bytes", "a request this large is followed by malloc_trim (0: never)"
)
OAUTH_DCR_MAX_BODY_BYTES = Limit(
    "TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES", 16 * KiB, "bytes", "an OAuth dynamic client registration's body"
)
OAUTH_DCR_MAX_REDIRECT_URIS = Limit(
    "TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS", 10, "URIs", "redirect URIs of one registered OAuth client"
)
OAUTH_DCR_MAX_FIELD_CHARS = Limit(
    "TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS", 2000, "characters", "one field of an OAuth client registration"
)
OAUTH_DCR_MAX_UNUSED_CLIENTS = Limit(
    "TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS", 1000, "clients", "registered OAuth clients not yet used"
)
OAUTH_UNUSED_CLIENT_HOURS = Measure(
    "TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS", 24, "hours", "a registered OAuth client unused this long may be deleted"
)

#
# Switches and addresses: defaults that bound nothing, kept here so that no module writes one twice
#

NEW_TABLE_STORAGE = Text(
    "TOOLHUB_NEW_TABLE_STORAGE", "rows", "storage", "how a table created with a document is stored (document|rows)"
)
PUBLIC_URL = Text("TOOLHUB_PUBLIC_URL", "", "URL", "where clients reach toolhub (empty: the request's host)")
DEV = Switch("TOOLHUB_DEV", False, "on/off", "development mode (seed_demo runs, the demo login is shown)")
JSON_LOGS = Switch("TOOLHUB_JSON_LOGS", False, "on/off", "one JSON log line per request and per tool call")
REQUEST_ID_IN_ERRORS = Switch(
    "TOOLHUB_REQUEST_ID_IN_ERRORS", True, "on/off", "error bodies carry the request's id as `request_id`"
)
OAUTH_ENABLED = Switch("TOOLHUB_OAUTH_ENABLED", True, "on/off", "whether MCP endpoints accept OAuth tokens")
OAUTH_CIMD_TRUSTED_ORIGINS: Setting[Any] = Setting(
    "TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS", (), "origins", "client metadata origins fetched on a private address (tests)"
)
OAUTH_CIMD_CA_FILE = Text("TOOLHUB_OAUTH_CIMD_CA_FILE", "", "path", "the CA trusted for those origins (tests)")
METRICS_TOKEN = Text("TOOLHUB_METRICS_TOKEN", "", "text", "the bearer token a Prometheus scraper sends to /metrics")
PASSWORD_HASH_LOCK_DIR = Text(
    "TOOLHUB_PASSWORD_HASH_LOCK_DIR", "", "path", "where the password-hashing slots' lock files are (empty: a temp dir)"
)

#
# Fixed limits: no setting changes them (each is bound to a format, an index or the code that checks it)
#

# Characters of a write's `idempotency_key`.
MAX_IDEMPOTENCY_KEY = 200
# Bytes of UTF-8 of a record's key in a table stored as rows: the key is kept in an index, and PostgreSQL's
# btree entries hold at most ~2.7 kB.
MAX_RECORD_KEY_BYTES = 2000
# Fields of one object a data schema describes (get_data_schema; the rest are left out).
SCHEMA_MAX_FIELDS = 200
# Top-level fields whose kinds a rows collection keeps (docs/tables-at-scale.md, "Field kinds"); past them the
# collection's kinds are `open`.
FIELD_KINDS_MAX_FIELDS = 200
# Characters of a result shown on the admin's try-it page (the whole value is still computed and logged).
TRY_IT_MAX_CHARS = 200_000
# Characters of a search query on every surface (search_tools' `query`, the API's `q`): agents paste whole user
# messages, which quote documents, code and data. bm25 reads all of it; the embedding model the sentences that
# carry the request. Not TOOLHUB_QUERY_MAX_LENGTH (a JMESPath expression's), which bounds a search query too.
SEARCH_QUERY_MAX_CHARS = 10_000
# A table's `redact_fields`: at most this many names, each of at most MAX_REDACT_FIELD_LENGTH characters.
MAX_REDACT_FIELDS = 100
MAX_REDACT_FIELD_LENGTH = 200
# An instance's own prompts (tools_app.validators, models/prompt.py): arguments per prompt, characters of an
# argument's description, of the template, of one argument value of prompts/get, and of the rendered text.
MAX_PROMPT_ARGUMENTS = 20
MAX_PROMPT_ARGUMENT_DESCRIPTION = 1024
MAX_PROMPT_TEMPLATE = 20_000
MAX_PROMPT_ARGUMENT = 10_000
MAX_PROMPT_RENDERED = 200_000
# A binding's pinned arguments (tools_app.grants): pins per binding, attributes per API key, characters of an
# attribute's value, and of a field name in a narrowing's `where`.
MAX_PINS = 20
MAX_ATTRIBUTES = 20
MAX_ATTRIBUTE_VALUE = 200
MAX_WHERE_FIELD = 200

# Checked in tools_app.validators:
# Characters of a tool's, a binding's or a prompt's description.
MAX_DESCRIPTION = 1024
# Examples in a tool's metadata.
MAX_EXAMPLES = 5
# Lines of one example in a tool's metadata.
MAX_EXAMPLE_LINES = 10
# Characters of one name in a table's `indexed_fields`.
MAX_INDEXED_FIELD_LENGTH = 200

# Checked in tools_app.resource_uris:
# Characters of a resource URI (a binding's, and one resources/read asks for).
MAX_RESOURCE_URI_CHARS = 2_000

# Checked in tools_app.paging:
# Characters of a paging cursor a call hands back.
MAX_CURSOR_LENGTH = 1_000

# Checked in tools_app.api.data_tools:
# Tools one bulk-binding request lists.
MAX_BULK_TOOLS = 1000

# Checked in tools_app.execution.record_pages:
# Records on one page of a table's records (`limit`).
RECORD_PAGE_MAX_SIZE = 200
# A page's `offset` into a table's records: no more than a table holds (TOOLHUB_MAX_TABLE_RECORDS' default).
RECORD_PAGE_MAX_OFFSET = 10_000_000

# Checked in tools_app.execution.pipeline:
# Characters of a tool's error message kept in its answer and its log entry.
TOOL_ERROR_MAX_MESSAGE_CHARS = 2000

# Checked in tools_app.execution.call_details:
# Levels of nesting of a call's arguments or result a log entry keeps (deeper: "[cut: nested deeper]").
CALL_LOG_MAX_KEPT_DEPTH = 32
# Characters a redacted string has at least to be blanked elsewhere in a log entry too ("no" or "F" would blank half
# the text).
REDACTED_MIN_REPEATED_CHARS = 3

# Checked in tools_app.execution.history_lines:
# Diff lines a history entry shows.
HISTORY_MAX_DIFF_LINES = 40
# Characters of one value in a history diff line.
HISTORY_MAX_VALUE_CHARS = 240
# Characters of one key or field name in where a history diff line acts.
HISTORY_MAX_KEY_CHARS = 80
# Operations of one history entry whose paths are resolved against the document (each costs a copy of the containers
# on its path); later ones are named by index. Diff lines stop at HISTORY_MAX_DIFF_LINES, so only operations that
# show no line (a record replaced by an equal one) reach it.
HISTORY_MAX_NAMED_OPERATIONS = 4 * HISTORY_MAX_DIFF_LINES

# Checked in tools_app.registry.search:
# Tools one search returns (its `limit`).
SEARCH_MAX_RESULTS = 50
# Characters of a regex search pattern.
SEARCH_MAX_REGEX_CHARS = 200
# Parts of a multi-part search request scored on their own (the heaviest), besides the whole request.
SEARCH_MAX_SCORED_PARTS = 8

# Checked in tools_app.registry.guide:
# Bytes of the guide's whole answer (as JSON), whatever the scope's result budget.
GUIDE_MAX_BYTES = 50 * 1024
# Names a guide line lists (the rest: how many more).
GUIDE_MAX_LISTED_NAMES = 20
# Characters of a parameter's description in the guide's compact form.
GUIDE_MAX_COMPACT_DESCRIPTION_CHARS = 160

# Checked in tools_app.toolsets:
# Characters of a generated tool's name prefix: tool names are at most 64 characters, and `_preview` is the longest
# suffix.
GENERATED_MAX_PREFIX_CHARS = 64 - len("_preview")
# Characters of an example value or result a generated description quotes.
GENERATED_MAX_EXAMPLE_CHARS = 40
# Fields a generated `_preview` tool shows of each record.
GENERATED_PREVIEW_MAX_FIELDS = 4
# Characters of a field or table name a generated description quotes.
GENERATED_MAX_QUOTED_NAME_CHARS = 64
# Levels of objects inside records a generated schema closes from the data (deeper: no closed schema).
CLOSED_SCHEMA_MAX_DEPTH = 4
# Fields of one object inside records a generated schema closes from the data (more: no closed schema).
CLOSED_SCHEMA_MAX_FIELDS = 100
# Records of a table's sample whose nested objects a generated schema is closed from.
CLOSED_SCHEMA_MAX_RECORDS = 1000
# Field names a generated tool records of its data's shape.
GENERATED_SHAPE_MAX_FIELDS = 100

# Checked in tools_app.data_access.shape:
# Keys of a keyed collection a data schema quotes as samples.
SCHEMA_MAX_SAMPLE_KEYS = 10
# Levels of a value a data schema's template describes.
SCHEMA_MAX_TEMPLATE_DEPTH = 4

# Checked in tools_app.data_access.arguments:
# Characters of an argument's schema error (jsonschema's messages quote the failing value whole).
ARGUMENT_ERROR_MAX_CHARS = 1000

# Checked in tools_app.data_access.slow_queries:
# Characters of a slow query's note.
SLOW_QUERY_MAX_NOTE_CHARS = 500

# Checked in tools_app.services.guard:
# Uses an IN_USE answer lists (and says how many more there are).
IN_USE_MAX_LISTED = 50

# Checked in tools_app.selectors:
# Clients the change guard names per (instance, tool): enough to recognise them, never a long list in an error body.
IN_USE_MAX_CLIENTS = 5

# Checked in tools_app.services.imports:
# Characters of a bad import line quoted in an error.
IMPORT_MAX_QUOTED_LINE_CHARS = 200

# Checked in tools_app.admin.setup:
# Characters of the document the admin's setup page reads (a file or pasted text); the API takes up to
# TOOLHUB_MAX_REQUEST_BYTES.
ADMIN_SETUP_MAX_DOCUMENT_CHARS = 20_000_000

# Checked in tools_app.admin.table_history:
# Characters of a table version's document shown on its admin page (the rest: download).
ADMIN_MAX_SHOWN_DOCUMENT_CHARS = 200_000

# Checked in tools_app.admin.table_records:
# Characters of a record shown in the admin's list (the whole record: its page).
ADMIN_MAX_SHOWN_RECORD_CHARS = 300
# Characters of JSON an admin record edit may post.
ADMIN_MAX_EDITED_RECORD_CHARS = 200_000

# Checked in tools_app.kernel.json_patch:
# Items of an array's changed middle (either side) a diff aligns (difflib's matching is quadratic in the worst
# case); a longer one is compared position by position: the patch stays correct, only less small.
PATCH_MAX_ALIGNED_ITEMS = 200_000

# Checked in tools_app.kernel.telemetry.metrics:
# Distinct field-name label values per process (field names come from the data), then "other".
METRICS_MAX_FIELD_LABELS = 200
# Characters of a field-name label value.
METRICS_MAX_FIELD_LABEL_CHARS = 64

# Checked in mcp_app.features:
# Characters of the typed value a completion/complete request completes.
COMPLETION_MAX_TYPED_CHARS = 1_000
# Values of one completion: the MCP protocol's cap.
COMPLETION_MAX_VALUES = 100

# Checked in mcp_app.handlers:
# Close names an unknown tool's error suggests.
UNKNOWN_TOOL_MAX_SUGGESTIONS = 3

# Checked in mcp_app.hops:
# Threads the database hop pool lends beyond its size while its threads wait.
HOP_MAX_LENT_THREADS = 32

# Checked in oauth_app.cimd:
# Characters of a URL a client ID metadata document gives (longer: ignored).
CIMD_MAX_URI_CHARS = 2000
# Bytes of a metadata document response's status line and headers, on top of the document.
CIMD_MAX_HEADER_BYTES = 8 * 1024

# Checked in toolhub.as_client:
# Pages of each list the admin's connection check shows (TOOLHUB_MCP_PAGE_SIZE each); a longer list says it was cut.
CONNECTION_CHECK_MAX_PAGES = 20

LIMITS: dict[str, Setting] = {
    value.setting: value for name, value in list(globals().items()) if name.isupper() and isinstance(value, Setting)
}


#
# The readers, by the names the modules that check them use
#

max_table_bytes = MAX_TABLE_BYTES.get
max_table_depth = MAX_TABLE_DEPTH.get
max_argument_depth = MAX_ARGUMENT_DEPTH.get
max_table_records = MAX_TABLE_RECORDS.get
max_record_bytes = MAX_RECORD_BYTES.get
max_import_bytes = MAX_IMPORT_BYTES.get
max_owner_data_bytes = MAX_OWNER_DATA_BYTES.get
max_indexed_fields = MAX_INDEXED_FIELDS.get
max_evaluated_bytes = MAX_EVALUATED_BYTES.get
history_max_table_bytes = HISTORY_MAX_TABLE_BYTES.get
history_max_owner_bytes = HISTORY_MAX_OWNER_BYTES.get
history_max_arguments_bytes = HISTORY_MAX_ARGUMENTS_BYTES.get
default_max_result_bytes = MAX_RESULT_BYTES.get
show_all_max_bytes = TRY_IT_SHOW_ALL_BYTES.get


def max_rows_table_bytes(vendor: str) -> int:
    """TOOLHUB_MAX_ROWS_TABLE_BYTES, or when it is 0 (the default) the figure of the database engine `vendor`."""
    configured = MAX_ROWS_TABLE_BYTES.raw()
    if configured:
        return int(configured)
    return ROWS_TABLE_BYTES_BY_ENGINE["postgresql" if vendor == "postgresql" else "sqlite"]


def rates() -> Mapping[str, str]:
    """The configured rate of each scope that has one (settings.TOOLHUB_RATE_LIMITS; an empty rate is none): the
    setting itself, read-only (every MCP request reads it, so it is not copied)."""
    return RATE_LIMITS.raw() or {}
