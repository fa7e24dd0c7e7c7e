"""Binding: a tool exposed on an MCP instance, optionally renamed (SPEC §2.4)."""

from django.core.exceptions import ValidationError
from django.db import models

from ..validators import MAX_DESCRIPTION, validate_tool_name
from .instance import McpInstance, OwnedThroughInstanceQuerySet
from .tool import Tool


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
        db_table = "mcp_app_binding"  # created by mcp_app (see models/__init__.py)
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
