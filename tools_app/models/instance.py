"""McpInstance: one MCP endpoint, /mcp/<slug>/ (SPEC §2.3)."""

from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from tools_app.kernel.limits import PUBLIC_URL
from tools_app.models.base import OwnedModel
from tools_app.permissions import OwnedQuerySet
from tools_app.validators import validate_rate


class Discovery(models.TextChoices):
    LIST_ALL = "list_all", "List all tools"
    SEARCH = "search", "Search (list only registry tools)"


class LogLevel(models.TextChoices):
    """The MCP logging levels (RFC 5424 severities), lowest first."""

    DEBUG = "debug", "debug"
    INFO = "info", "info"
    NOTICE = "notice", "notice"
    WARNING = "warning", "warning"
    ERROR = "error", "error"
    CRITICAL = "critical", "critical"
    ALERT = "alert", "alert"
    EMERGENCY = "emergency", "emergency"


class McpInstance(OwnedModel):
    """One MCP endpoint, /mcp/<slug>/, exposing the tools of its enabled bindings."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(
        max_length=100, unique=True, help_text="URL segment of the endpoint /mcp/{slug}/: letters, digits, '-' and '_'."
    )
    description = models.TextField(blank=True)
    instructions = models.TextField(blank=True, help_text="Sent to MCP clients in the initialize result.")
    enabled = models.BooleanField(default=True)
    discovery = models.CharField(max_length=16, choices=Discovery.choices, default=Discovery.LIST_ALL)
    allow_registration = models.BooleanField(default=False)
    # tools_app.grants: every caller sees and calls only the tools that change no data.
    read_only = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Every caller sees and calls only the bound tools that change no data.",
    )
    # The upper bound is PostgreSQL's integer maximum, so SQLite (64-bit) refuses what PostgreSQL cannot store.
    # The default (about 10,000-16,000 tokens of JSON) and why: docs/paging.md.
    max_result_bytes = models.PositiveIntegerField(
        default=40_000, validators=[MinValueValidator(1_000), MaxValueValidator(2_147_483_647)]
    )
    # Per-call evaluation budgets (docs/budgets.md); empty = the server's default (settings).
    query_cpu_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(10), MaxValueValidator(30_000)],
        help_text="CPU milliseconds one tool call may use (10 to 30,000); empty: the server default.",
    )
    query_max_elements = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1_000), MaxValueValidator(50_000_000)],
        help_text="Elements one call may build or walk (1,000 to 50,000,000); empty: the server default.",
    )
    query_max_bytes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(10_000), MaxValueValidator(512 * 1024 * 1024)],
        help_text="Logical JSON bytes of a value one call may build or walk (10,000 to 536,870,912); "
        "empty: the server default.",
    )
    # Requests per API key on /mcp/<slug>/ (docs/rate-limits.md).
    key_rate_limit = models.CharField(
        max_length=40,
        blank=True,
        validators=[validate_rate],
        help_text="Requests each API key may send to this endpoint, as <count>/<period> (e.g. '120/minute', "
        "'10/second', '100/5 minutes'). Empty: the server's default (TOOLHUB_RATE_LIMIT_MCP_KEY, 600/minute).",
    )

    # Log messages (notifications/message) on every tools/call, for clients that cannot keep a level
    # between requests on a stateless server (docs/mcp-clients.md, "Progress and logs"). Empty: off.
    log_level = models.CharField(
        max_length=9,
        blank=True,
        choices=LogLevel.choices,
        help_text="Send MCP clients log messages of every tool call at this level and above (debug: each step "
        "of the call; info: its end; warning: failures), on a streamed answer. Empty: off (clients still get "
        "them on calls that ask: a progress token, or a log level in the request on 2026-07-28).",
    )

    # Whether the call log keeps each call's arguments and an excerpt of its result (docs/call-log.md).
    record_call_details = models.BooleanField(
        "record call details",
        default=True,
        db_default=True,
        help_text="Keep each call's arguments and an excerpt of its result in the call log (bounded, with "
        "credentials and the tables' redact_fields redacted). Off: metadata only (tool, outcome, timing, caller).",
    )

    class Meta:
        ordering = ["name", "id"]
        db_table = "mcp_app_mcpinstance"  # created by mcp_app (see models/__init__.py)
        verbose_name = "MCP instance"

    def __str__(self):
        return self.name

    @property
    def endpoint_path(self) -> str:
        return f"/mcp/{self.slug}/"

    def endpoint_url(self, request: Any = None) -> str:
        """Absolute URL of /mcp/<slug>/: TOOLHUB_PUBLIC_URL when set (behind a proxy), else from the request's
        scheme and host; the path alone with neither."""
        base = PUBLIC_URL.get()
        if base:
            return base.rstrip("/") + self.endpoint_path
        if request is not None:
            return request.build_absolute_uri(self.endpoint_path)
        return self.endpoint_path


class OwnedThroughInstanceQuerySet(OwnedQuerySet):
    owner_lookup = "mcp_instance__owner"
