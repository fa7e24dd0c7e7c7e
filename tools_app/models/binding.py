"""Binding: a tool exposed on an MCP instance, optionally renamed (SPEC §2.4)."""

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import models

from tools_app.choices import ToolType
from tools_app.grants import pin_problems
from tools_app.kernel.limits import MAX_DESCRIPTION, MAX_RESOURCE_URI_CHARS
from tools_app.models.instance import McpInstance, OwnedThroughInstanceQuerySet
from tools_app.models.tool import NameClash, Tool
from tools_app.resource_uris import conflict, resource_uri_problem, validate_resource_uri
from tools_app.validators import validate_tool_name


class BindingQuerySet(OwnedThroughInstanceQuerySet):
    def with_resource_uri(self, instance_id: int) -> "BindingQuerySet":
        """The bindings of an instance that name a custom resource URI (enabled or not: a disabled one keeps
        its URI for when it is enabled again)."""
        return self.filter(mcp_instance_id=instance_id).exclude(resource_uri="")

    def enabled_for(self, instance: McpInstance) -> "BindingQuerySet":
        """SPEC §2.4: the enabled bindings of an instance, the only source of what it exposes."""
        return self.filter(mcp_instance=instance, enabled=True).select_related("tool")

    def name_clashes(
        self,
        *,
        instance_ids: Iterable[int],
        name: str,
        exclude_binding: int | None = None,
        exclude_tool: int | None = None,
    ) -> list["NameClash"]:
        """SPEC §2.4, THE name rule: the bindings of `instance_ids` whose effective name is `name`, ignoring case
        (other than the binding or the tool being saved). Model validation (a tool's rename), the binding
        services and the admin's binding forms all ask this; the unique constraint on (instance, name_key) is
        the guarantee under concurrency, this the friendly answer naming the tool and the instance."""
        clashes = self.filter(mcp_instance_id__in=list(instance_ids), name_key=name.lower())
        if exclude_binding is not None:
            clashes = clashes.exclude(pk=exclude_binding)
        if exclude_tool is not None:
            clashes = clashes.exclude(tool_id=exclude_tool)
        return [NameClash.of(binding) for binding in clashes.select_related("mcp_instance", "tool").order_by("pk")]

    def resource_uri_clash(self, *, instance_id: int, uri: str, exclude_binding: int | None = None) -> str | None:
        """Why `uri` cannot be a resource URI of instance `instance_id` next to its other bindings' custom URIs
        (tools_app.resource_uris.conflict: unique; a template the same as another or matching a fixed URI), or
        None. Binding.clean asks it; the binding services ask again under the instance's lock."""
        others = self.with_resource_uri(instance_id).select_related("tool", "mcp_instance").order_by("pk")
        if exclude_binding is not None:
            others = others.exclude(pk=exclude_binding)
        for other in others:
            problem = conflict(uri, other.resource_uri)
            if problem is not None:
                where = f"of the tool {other.effective_name!r} on the instance {other.mcp_instance.name!r}"
                return problem.replace("{where}", where)
        return None


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
    # (tools_app.resource_uris) Where MCP clients read this binding's mount instead of the default
    # toolhub://tables/<id>[/<path>] URI. Blank: the default.
    resource_uri = models.CharField(
        "resource URI",
        max_length=MAX_RESOURCE_URI_CHARS,
        blank=True,
        validators=[validate_resource_uri],
        help_text="Optional. On a get_all_data or query_data tool: the URI the whole mount is read at as an MCP "
        "resource (e.g. 'orders://all'). On a select tool: a record template with one variable for the key "
        "(e.g. 'orders://order/{id}'). Other tool types take none. Unique on the instance (a template may "
        "not match another binding's URI there); the toolhub: scheme is reserved. Blank: "
        "toolhub://tables/<id>[/<path>].",
    )
    # tools_app.grants: a read-only binding of a tool that changes data is in no caller's set.
    read_only = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Read-only: a tool that changes data (create, update, delete, register_tool) "
        "bound this way is listed to no caller and refused.",
    )
    pinned_arguments = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text='Arguments this binding fixes, hidden from callers: {"<argument>": {"value": <json>}} or '
        '{"<argument>": {"from": "key.label" | "key.attributes.<name>" | "user.username"}}.',
    )
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
        if self.resource_uri and self.tool_id:
            self._check_resource_uri()
        if self.pinned_arguments is None:
            self.pinned_arguments = {}
        if self.tool_id:
            problems = pin_problems(self.pinned_arguments, self.tool.input_schema, self.tool.type)
            if problems:
                raise ValidationError(
                    {"pinned_arguments": [ValidationError(problem, code="invalid") for problem in problems]}
                )

    def _check_resource_uri(self) -> None:
        """A fixed URI on a reader, a record template on a select, nothing on other types; unique on
        the instance (a friendly pre-check: services.instances re-checks it under the instance's lock)."""
        tool_type = self.tool.type
        if tool_type not in RESOURCE_URI_TYPES:
            message = (
                f"Only get_all_data, query_data and select tools are MCP resources; a {tool_type} tool has no "
                "resource URI. Leave it blank."
            )
            raise ValidationError({"resource_uri": ValidationError(message, code="invalid")})
        problem = resource_uri_problem(self.resource_uri, record=tool_type == ToolType.SELECT)
        if problem is not None:
            raise ValidationError({"resource_uri": ValidationError(problem, code="invalid")})
        if self.mcp_instance_id:
            clash = Binding.objects.resource_uri_clash(
                instance_id=self.mcp_instance_id, uri=self.resource_uri, exclude_binding=self.pk
            )
            if clash is not None:
                raise ValidationError({"resource_uri": ValidationError(clash, code="unique")})


# The tool types whose bindings may name a resource URI (mcp_app.features serves them).
RESOURCE_URI_TYPES = frozenset({ToolType.GET_ALL_DATA, ToolType.QUERY_DATA, ToolType.SELECT})
