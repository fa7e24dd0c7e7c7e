"""CallLog: one row per tool call on every surface (SPEC §4.4)."""

import json
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from tools_app.models.api_key import ApiKey
from tools_app.models.instance import McpInstance
from tools_app.models.tool import Tool
from tools_app.permissions import OwnedQuerySet


class Surface(models.TextChoices):
    """Where a call came in: every surface runs tools through tools_app.execution.pipeline.run_tool_call."""

    MCP = "mcp", "MCP"
    API = "api", "API"
    ADMIN = "admin", "Admin try-it"


class CallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"


# What the activity page reads of each call besides owner and time (tools_app.activity).
ACTIVITY_COLUMNS = ["mcp_instance", "tool_name", "status", "error_code", "duration_ms"]


class CallLog(models.Model):
    """One row per tool call on every surface (MCP, the API, the admin's try-it), written by the call pipeline
    (tools_app.execution.pipeline) before the call answers."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="call_logs",
        verbose_name="MCP instance",
    )
    # No index of its own (db_index=False), nor for `owner`: Meta.indexes has one starting with each, which
    # serves their lookups (a tool's calls, a deleted tool's or owner's rows); every call's insert would
    # otherwise update two indexes more.
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="call_logs", db_index=False
    )
    tool_name = models.CharField(max_length=64)
    api_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="call_logs", verbose_name="API key"
    )
    # The owner of what was called (whose call log shows the row); `user` is who called: the request's user
    # over the API and the admin (a superuser may call another's tool), the key's owner over MCP.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name="caller",
    )
    # Over MCP with an OAuth access token: the client's id (`user` is who authorized it).
    oauth_client = models.CharField("OAuth client", max_length=255, blank=True, default="")
    surface = models.CharField(max_length=16, choices=Surface.choices, default=Surface.MCP)
    status = models.CharField(max_length=8, choices=CallStatus.choices)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    duration_ms = models.FloatField()
    # What the client sent and got (tools_app.execution.call_details): JSON text, redacted, bounded by
    # TOOLHUB_CALL_ARGUMENTS_BYTES / TOOLHUB_CALL_RESULT_BYTES (a longer value is cut inside its structure,
    # marked, and flagged *_truncated). "" when not recorded (the instance records metadata only).
    # Defaults in the database too: a server still running the previous release keeps recording while the
    # migration is applied.
    arguments = models.TextField(blank=True, default="", db_default="")
    arguments_truncated = models.BooleanField(default=False, db_default=False)
    # The result (or, for a failed call, the error as the client got it).
    result_excerpt = models.TextField(blank=True, default="", db_default="")
    result_truncated = models.BooleanField(default=False, db_default=False)
    # UTF-8 bytes of arguments, result_excerpt and error_message: what the owner's storage bound counts.
    recorded_bytes = models.PositiveIntegerField(default=0, db_default=0)
    # What the call's table queries reported: the suggestion to index a field a slow query filtered on
    # (tools_app.data_access.slow_queries). A database default too, as the columns above have.
    notes = models.TextField(blank=True, default="", db_default="")
    # When the call started (indexed first in ACTIVITY_COLUMNS' index below).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        db_table = "mcp_app_calllog"  # created by mcp_app (see models/__init__.py)
        ordering = ["-created_at", "-id"]
        # The activity page (tools_app.activity) counts a time window's rows by these columns: the two indexes
        # that start with the window (an owner's rows, everyone's for a superuser) hold them all, so its
        # statement reads the index alone, never the rows with their recorded arguments and results. They also
        # serve the call log's list, newest first (an owner's, everyone's).
        indexes = [
            models.Index(fields=["owner", "created_at", *ACTIVITY_COLUMNS], name="calllog_owner_activity"),
            models.Index(fields=["created_at", *ACTIVITY_COLUMNS], name="calllog_activity"),
            models.Index(fields=["tool", "-created_at"]),
        ]

    def __str__(self):
        return f"{self.tool_name} {self.status} {self.created_at:%Y-%m-%d %H:%M:%S}"

    @property
    def details_recorded(self) -> bool:
        """Whether the call's arguments and result excerpt were recorded (a JSON text is never empty)."""
        return bool(self.arguments)

    @property
    def arguments_value(self) -> Any:
        """The recorded arguments as JSON (None when not recorded)."""
        return json.loads(self.arguments) if self.arguments else None

    @property
    def result_value(self) -> Any:
        """The recorded result excerpt as JSON (None when not recorded)."""
        return json.loads(self.result_excerpt) if self.result_excerpt else None
