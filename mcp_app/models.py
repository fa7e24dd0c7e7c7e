"""MCP instances, their API keys, bindings of tools to instances, and the call log (SPEC §2.3, §2.4, §4.4)."""

import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from tools_app.models import OwnedModel, Tool
from tools_app.permissions import OwnedQuerySet
from tools_app.validators import MAX_DESCRIPTION, validate_tool_name

API_KEY_PREFIX = "thk_"


class Discovery(models.TextChoices):
    LIST_ALL = "list_all", "List all tools"
    SEARCH = "search", "Search (list only registry tools)"


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
    # The upper bound is PostgreSQL's integer maximum, so SQLite (64-bit) refuses what PostgreSQL cannot store.
    max_result_bytes = models.PositiveIntegerField(
        default=200_000, validators=[MinValueValidator(1_000), MaxValueValidator(2_147_483_647)]
    )

    class Meta:
        ordering = ["name", "id"]
        verbose_name = "MCP instance"

    def __str__(self):
        return self.name

    @property
    def endpoint_path(self) -> str:
        return f"/mcp/{self.slug}/"


class OwnedThroughInstanceQuerySet(OwnedQuerySet):
    owner_lookup = "mcp_instance__owner"


class ApiKey(models.Model):
    """A bearer key for one instance. Only a SHA-256 of the secret is stored; the plaintext is shown once."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        on_delete=models.CASCADE,
        related_name="api_keys",
        verbose_name="MCP instance",
        error_messages={"invalid": "%(model)s with %(field)s %(value)r does not exist."},
    )
    label = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = OwnedThroughInstanceQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        verbose_name = "API key"

    def __str__(self):
        return f"{self.label or 'key'} ({self.prefix}…)"

    @property
    def owner_id(self):
        return self.mcp_instance.owner_id

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @staticmethod
    def hash_key(plaintext: str) -> str:
        # The secret has 256 bits of entropy, so a fast hash is safe here (no dictionary attack).
        return hashlib.sha256(plaintext.encode()).hexdigest()

    @staticmethod
    def generate() -> str:
        return API_KEY_PREFIX + secrets.token_urlsafe(32)


class BindingQuerySet(OwnedThroughInstanceQuerySet):
    def enabled_for(self, instance: McpInstance) -> "BindingQuerySet":
        """SPEC §2.4: the enabled bindings of an instance, the only source of what it exposes."""
        return self.filter(mcp_instance=instance, enabled=True).select_related("tool")


class Binding(models.Model):
    """A tool exposed on an instance, optionally under another name or description."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        on_delete=models.CASCADE,
        related_name="bindings",
        verbose_name="MCP instance",
        error_messages={"invalid": "%(model)s with %(field)s %(value)r does not exist."},
    )
    tool = models.ForeignKey(
        Tool,
        on_delete=models.CASCADE,
        related_name="bindings",
        error_messages={"invalid": "%(model)s with %(field)s %(value)r does not exist."},
    )
    enabled = models.BooleanField(default=True)
    name_override = models.CharField(max_length=64, blank=True, validators=[validate_tool_name])
    description_override = models.TextField(blank=True, max_length=MAX_DESCRIPTION)
    # SPEC §2.4: lower-cased effective name, kept by the services so the database itself refuses
    # two bindings of one instance with the same name (race-proof on every backend).
    name_key = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BindingQuerySet.as_manager()

    class Meta:
        ordering = ["mcp_instance_id", "name_key", "id"]
        constraints = [
            models.UniqueConstraint(fields=["mcp_instance", "tool"], name="binding_unique_tool_per_instance"),
            models.UniqueConstraint(fields=["mcp_instance", "name_key"], name="binding_unique_name_per_instance"),
        ]

    def __str__(self):
        return f"{self.effective_name} on {self.mcp_instance}"

    @property
    def owner_id(self):
        return self.mcp_instance.owner_id

    @property
    def effective_name(self) -> str:
        return self.name_override or self.tool.name

    @property
    def effective_description(self) -> str:
        return self.description_override or self.tool.description

    def clean(self):
        if self.mcp_instance_id and self.tool_id:
            if self.mcp_instance.owner_id != self.tool.owner_id:
                raise ValidationError(
                    {
                        "tool": ValidationError(
                            "Select a valid choice. That tool is not one of yours.", code="invalid_choice"
                        )
                    }
                )
        if self.tool_id:
            self.name_key = self.effective_name.lower()


class CallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"


class CallLog(models.Model):
    """One row per tool call over MCP (and the API and the admin's try-it), for the admin's call log."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="call_logs",
        verbose_name="MCP instance",
    )
    tool = models.ForeignKey(Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="call_logs")
    tool_name = models.CharField(max_length=64)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="call_logs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=16, default="mcp")
    status = models.CharField(max_length=8, choices=CallStatus.choices)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    duration_ms = models.FloatField()
    # The time of the call, not of the write: MCP calls are written in batches (mcp_app.recording).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"]), models.Index(fields=["tool", "-created_at"])]

    def __str__(self):
        return f"{self.tool_name} {self.status} {self.created_at:%Y-%m-%d %H:%M:%S}"


__all__ = ["ApiKey", "Binding", "CallLog", "CallStatus", "Discovery", "McpInstance"]
