"""TableChange: one entry of a table's change log and audit trail (docs/history.md).

A table is stored as a snapshot (Table.data at Table.snapshot_version) plus this append-only log: every data
write appends one entry, in the transaction that moves Table.version, holding the RFC 6902 patch from the
version before (`version` - 1) to `version`, its inverse (back again), and who made it, how and with what
arguments. The document at the table's version is its snapshot with the entries after it applied; an older
version inside retention is the current document with the inverses applied, newest first.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from tools_app.models.api_key import ApiKey
from tools_app.models.api_token import ApiToken
from tools_app.models.call import Surface
from tools_app.models.fields import WrittenJSONField
from tools_app.models.instance import McpInstance
from tools_app.models.table import Table
from tools_app.models.tool import Tool


class TableChange(models.Model):
    """One data write of a table: its patch, its inverse and its audit (who, through what, with what)."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="changes")
    version = models.PositiveBigIntegerField(help_text="The table's version after this write (before: version - 1).")
    # The JSON values keep their text as written (WrittenJSONField): a version opened, a restore, a document caught
    # up through the log and an idempotent repeat give back the key order written, on every engine.
    patch = WrittenJSONField(help_text="RFC 6902 JSON Patch from version - 1 to version.")
    inverse = WrittenJSONField(help_text="RFC 6902 JSON Patch from version back to version - 1.")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    # Who and how: the user (over MCP the key's owner, or the user who authorized an OAuth client),
    # the MCP key, API token or OAuth client, the surface, the tool and, over MCP, the instance and the binding's
    # effective name. A deleted key, token, tool, instance or
    # user costs only its link; the names stay.
    surface = models.CharField(max_length=16, choices=Surface.choices, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    api_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name="API key"
    )
    api_token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    oauth_client = models.CharField(
        "OAuth client", max_length=255, blank=True, default="", help_text="Over MCP with an OAuth token: its client id."
    )
    tool = models.ForeignKey(Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tool_name = models.CharField(max_length=64, blank=True)
    mcp_instance = models.ForeignKey(
        McpInstance, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name="MCP instance"
    )
    binding_name = models.CharField(max_length=64, blank=True)
    arguments = WrittenJSONField(null=True, blank=True)
    # Safe writes: a retry with the same key within 24 h answers `result` and writes nothing.
    idempotency_key = models.CharField(max_length=200, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)
    result = WrittenJSONField(null=True, blank=True)
    # What the entry costs: the JSON text of its patch, inverse, arguments and result. Their sum over a table is
    # Table.history_bytes, which the history quotas bound (services.table_log.history_enforce).
    bytes = models.PositiveBigIntegerField(default=0, db_default=0, editable=False)

    class Meta:
        ordering = ["table", "-version"]
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="table_change_unique_version")]
        indexes = [
            models.Index(
                fields=["table", "idempotency_key"],
                name="table_change_idempotency",
                condition=~models.Q(idempotency_key=""),
            )
        ]

    def __str__(self) -> str:
        return f"{self.table_id} v{self.version}"

    @property
    def version_before(self) -> int:
        return self.version - 1
