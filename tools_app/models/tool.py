"""Tool: a typed operation on a table mount, a registry tool or an external one (SPEC §2.2).

Validation lives here and in validators.py and is reached through full_clean() from every write
path (admin forms, API serializers, services). Cross-row rules that must hold under concurrency
(binding names, per-table write order) are decided in services with locks and constraints.
"""

from typing import NamedTuple

from django.core.exceptions import ValidationError
from django.db import models

from tools_app.choices import ToolType, default_category
from tools_app.kernel.errors import ErrorCode
from tools_app.kernel.limits import MAX_DESCRIPTION
from tools_app.models.base import OwnedModel
from tools_app.models.table import Table
from tools_app.permissions import OwnedQuerySet
from tools_app.tool_schemas import default_input_schema, is_other_types_default
from tools_app.tool_types import DATA_KINDS, EXTERNAL, TOOL_TYPES, WRITE, ToolTypeSpec, check_arguments, check_tool
from tools_app.validators import (
    validate_input_schema,
    validate_json_pointer,
    validate_json_schema,
    validate_json_value,
    validate_metadata,
    validate_redact_arguments,
    validate_tool_name,
)


class ToolQuerySet(OwnedQuerySet):
    def of_type(self, *types: str) -> "ToolQuerySet":
        return self.filter(type__in=types)


class Tool(OwnedModel):
    """A tool an LLM agent can call: a typed operation on a table mount, a registry tool or an external one."""

    name = models.CharField(max_length=64, validators=[validate_tool_name], db_index=True)
    alias = models.CharField(max_length=200, blank=True)
    type = models.CharField(max_length=32, choices=ToolType.choices)
    table = models.ForeignKey(Table, null=True, blank=True, on_delete=models.CASCADE, related_name="tools")
    json_path = models.CharField(
        "JSON path",
        max_length=500,
        blank=True,
        validators=[validate_json_pointer],
        help_text="Mount point inside the table as a JSON Pointer (RFC 6901). Leave empty for the whole "
        'document; "/orders" is the value under the key "orders", "/a~1b" the key "a/b".',
    )
    description = models.TextField(blank=True, max_length=MAX_DESCRIPTION)
    input_schema = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Argument names whose values the call log never keeps (the call-detail pipeline, docs/call-log.md).
    redact_arguments = models.JSONField(
        default=list,
        db_default=[],  # in the database too: the previous release still writes tools during the migration
        blank=True,
        validators=[validate_redact_arguments],
        help_text="Argument names whose values never appear in the call log: the value of such an argument, or of "
        'a key so named inside one at any depth, is kept as "[redacted]", and so is that value where the call\'s '
        "result or error repeats it. Credentials (passwords, tokens, API keys, ...) are always redacted.",
    )
    use_count = models.PositiveBigIntegerField(default=0, editable=False)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ToolQuerySet.as_manager()  # type: ignore[misc]  # a narrower queryset than OwnedModel's

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "type"])]

    def __str__(self):
        return self.name

    # Properties read by every surface (SPEC §2.2 defaults).
    @property
    def category(self) -> str:
        return (self.metadata or {}).get("category") or default_category(self.type)

    @property
    def tags(self) -> list[str]:
        return list((self.metadata or {}).get("tags") or [])

    @property
    def key_field(self) -> str:
        return (self.metadata or {}).get("key_field") or "id"

    @property
    def spec(self) -> ToolTypeSpec | None:
        """The type's spec (tools_app.tool_types), None for a value that is no type."""
        return TOOL_TYPES.get(self.type)

    @property
    def is_data_tool(self) -> bool:
        return self.spec is not None and self.spec.kind in DATA_KINDS

    @property
    def is_read_only(self) -> bool:
        return self.spec is not None and self.spec.read_only

    @property
    def is_write(self) -> bool:
        return self.spec is not None and self.spec.kind == WRITE

    @property
    def is_external(self) -> bool:
        return self.spec is not None and self.spec.kind == EXTERNAL

    def _fill_defaults(self) -> None:
        if self.input_schema in (None, {}, "") or is_other_types_default(self.input_schema, self.type):
            # A schema that is still another type's default was never customised: after a type change it
            # follows the new type instead of blocking the change (SPEC §2.2 per-type defaults).
            self.input_schema = default_input_schema(self.type)
        if self.metadata is None:
            self.metadata = {}
        if self.output_schema == {}:
            self.output_schema = None

    def name_conflicts(self, new_name: str) -> list["NameClash"]:
        """The other bindings that hold `new_name` (ignoring case) on an instance where this tool is bound
        under its own name, i.e. where renaming it to `new_name` would collide (SPEC §2.4).

        Only bindings without a name override follow the tool's name.
        """
        if self.pk is None:
            return []
        own = self.bindings.filter(name_override="").values_list("mcp_instance_id", flat=True)
        # The Binding model through the relation: binding.py imports this module.
        return self.bindings.model.objects.name_clashes(instance_ids=own, name=new_name, exclude_tool=self.pk)

    def clean(self):
        self._fill_defaults()
        errors: dict[str, list[ValidationError]] = {}

        def add(problems):
            for field, message, code, params in problems:
                errors.setdefault(field, []).append(ValidationError(message, code=code, params=params or None))

        def collect(field, validate, value) -> bool:
            try:
                validate(value)
            except ValidationError as exc:
                errors.setdefault(field, []).extend(exc.error_list)
                return False
            return True

        add(check_tool(self))  # the type's rules: table, JSON path, description
        if self.table_id is not None and self.owner_id is not None:
            # SPEC §2: a tool only mounts a table of its own owner. The table the caller gave (the API's serializer
            # has just read it) answers without a query; setting table_id drops it, so it is this id's row.
            given = self.table if Tool.table.is_cached(self) else None
            owner: int | None
            if given is not None:
                owner = given.owner_id
            else:
                owner = Table.objects.filter(pk=self.table_id).values_list("owner_id", flat=True).first()
            if owner is not None and owner != self.owner_id:
                add([("table", "Select a valid choice. That table is not one of yours.", "invalid_choice", {})])
        if len(self.description or "") > MAX_DESCRIPTION:
            params = {"max": MAX_DESCRIPTION, "n": len(self.description)}
            add([("description", "At most %(max)d characters (got %(n)d).", "max_length", params)])
        for field in ("input_schema", "output_schema", "metadata"):
            collect(field, validate_json_value, getattr(self, field))
        if collect("input_schema", validate_input_schema, self.input_schema):
            add(check_arguments(self))  # the arguments the type needs
        if self.output_schema is not None:
            collect("output_schema", validate_json_schema, self.output_schema)
        collect("metadata", validate_metadata, self.metadata)
        # The row only: whether the name collides on an instance is a cross-row rule, judged by
        # services.tool_update with Binding.objects.name_clashes.
        if errors:
            raise ValidationError(errors)


class NameClash(NamedTuple):
    """A binding that holds a name on an instance, as a NAME_CONFLICT error names it (SPEC §2.4)."""

    instance: str  # the instance's name
    tool: str  # the bound tool's own name
    effective_name: str  # the name the instance exposes it under: the binding's override, or `tool`

    @classmethod
    def of(cls, binding) -> "NameClash":
        """The clash with `binding` (an mcp_app Binding, its instance and tool loaded)."""
        return cls(binding.mcp_instance.name, binding.tool.name, binding.effective_name)


def name_conflict_error(field: str, name: str, clashes: list[NameClash]) -> ValidationError:
    """SPEC §2.4: the error names the conflicting tool and the instance.

    The tool is named by its own name; when the instance exposes it under an override, that name follows
    (it is the one that collides), so the message never passes an override off as a tool's name.
    """
    instance, tool, effective_name = clashes[0]
    if effective_name == tool:
        message = "The name %(name)r is already used by the tool %(tool)r on the instance %(instance)r"
    else:
        message = (
            "The name %(name)r is already used by the tool %(tool)r, bound as %(effective_name)r, "
            "on the instance %(instance)r"
        )
    return ValidationError(
        {
            field: ValidationError(
                message + " (names are unique per instance, ignoring case).",
                code=ErrorCode.NAME_CONFLICT,
                params={"name": name, "tool": tool, "effective_name": effective_name, "instance": instance},
            )
        }
    )
