"""RefusalCount: requests refused before the call pipeline (a rate limit), counted per owner, instance, scope and
minute for the owner's activity page (tools_app.services.refusals, docs/activity.md)."""

from django.conf import settings
from django.db import models

from tools_app.models.instance import McpInstance
from tools_app.permissions import OwnedQuerySet


class RefusalCount(models.Model):
    """`count` requests of `scope` refused in the minute starting at `minute`, for the owner's `mcp_instance` (None:
    the owner's own API requests). Written in batches by the process that refused them (services.refusals.flush):
    one (owner, instance, scope, minute) may have a row per flush, and readers add them up."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    mcp_instance = models.ForeignKey(
        McpInstance, null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name="MCP instance"
    )
    # tools_app.kernel.rate_limits' scope: "mcp_key" (an instance's API key or OAuth client) or "user" (the API).
    scope = models.CharField(max_length=16)
    minute = models.DateTimeField()
    count = models.PositiveIntegerField()

    objects = OwnedQuerySet.as_manager()

    class Meta:
        # The activity page reads a window's rows of an owner, or everyone's for a superuser; the retention prune
        # deletes by time.
        indexes = [
            models.Index(fields=["owner", "minute"], name="refusalcount_owner_minute"),
            models.Index(fields=["minute"], name="refusalcount_minute"),
        ]

    def __str__(self):
        return f"{self.scope} {self.count} at {self.minute:%Y-%m-%d %H:%M}"
