"""Create a planned set of tools (and their bindings) all or nothing, or bring a generated set up to date.

The plan (names, types, descriptions, output schemas derived from the data) is tools_app.toolsets'; this is its
write. A tool the generator made carries `metadata.generated` = {"hash": generated_hash(...) of the text it was
given, "shape": the data's shape then, "prefix"}: generating again for the same table, mount and type updates
that tool's description, output schema and examples instead of refusing its name, unless its owner edited them
by hand since (its text no longer has the stored hash): that tool is kept as it is, and the diff says what
generation would write (`overwrite_edited` writes it anyway). Every other name already used by one of the owner's
tools, or by a binding on the instance, is a NAME_CONFLICT. The whole set is written in one transaction, so a
refusal at any step (a concurrent bind taking a name included) leaves nothing behind.
"""

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from tools_app.kernel.errors import ErrorCode
from tools_app.models import Binding, McpInstance, Tool
from tools_app.services.generated_text import GENERATED_FIELDS, generated_edited, generated_hash, generated_text
from tools_app.services.instances import binding_create
from tools_app.services.locks import lock_rows_no_key
from tools_app.services.tables import tool_create, tool_update

__all__ = ["GENERATED_FIELDS", "ToolSetChange", "generated_edited", "generated_hash", "tool_set_create"]

# The metadata keys generation owns (beside `generated` itself); the owner's other keys are kept.
GENERATED_METADATA = ("key_field", "preview_keys", "examples")


@dataclass(frozen=True)
class ToolSetChange:
    """What generation did to one tool: `create`, `update`, `unchanged`, or `kept` (edited by hand, not
    overwritten); `diff` maps each GENERATED_FIELDS field that differs to (current, generated)."""

    name: str
    action: str
    diff: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "diff": {key: {"old": old, "new": new} for key, (old, new) in self.diff.items()},
        }


def _conflict(name: str, message: str, **params: Any) -> ValidationError:
    return ValidationError(
        {"name_prefix": ValidationError(message, code=ErrorCode.NAME_CONFLICT, params={"name": name, **params})}
    )


def _regenerates(existing: Tool, fields: dict[str, Any]) -> bool:
    """Whether `existing` is the tool this spec generated before: marked generated, same table, mount and type."""
    marker = (existing.metadata or {}).get("generated")
    table = fields.get("table")
    return (
        isinstance(marker, dict)
        and existing.type == fields["type"]
        and table is not None
        and existing.table_id == table.pk
        and existing.json_path == fields.get("json_path", "")
    )


def _existing(owner, tools: list[dict[str, Any]], mcp_instance: McpInstance | None) -> dict[str, Tool]:
    """The owner's generated tools each spec regenerates, by name; NAME_CONFLICT for a name another tool of the
    owner, or a binding on the instance, already uses."""
    found: dict[str, Tool] = {}
    for fields in tools:
        name = fields["name"]
        same_name = list(Tool.objects.filter(owner=owner, name__iexact=name).order_by("pk")[:2])
        if len(same_name) == 1 and same_name[0].name == name and _regenerates(same_name[0], fields):
            found[name] = same_name[0]
        elif same_name:
            raise _conflict(
                name,
                "The name %(name)r is already used by your tool %(tool)r (id %(id)d); pass another name_prefix, or "
                "delete that tool first.",
                tool=same_name[0].name,
                id=same_name[0].pk,
            )
        if mcp_instance is not None:
            exclude = found[name].pk if name in found else None
            clashes = Binding.objects.name_clashes(instance_ids=[mcp_instance.pk], name=name, exclude_tool=exclude)
            if clashes:
                raise _conflict(
                    name,
                    "The name %(name)r is already used by the tool %(tool)r on the instance %(instance)r (names are "
                    "unique per instance, ignoring case); pass another name_prefix.",
                    tool=clashes[0].tool,
                    instance=clashes[0].instance,
                )
    return found


def _diff(tool: Tool, fields: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    current = generated_text(tool.description, tool.output_schema, tool.metadata or {})
    wanted = generated_text(fields["description"], fields.get("output_schema"), fields.get("metadata") or {})
    return {key: (current[key], wanted[key]) for key in GENERATED_FIELDS if current[key] != wanted[key]}


def _regenerate(tool: Tool, fields: dict[str, Any], overwrite_edited: bool) -> ToolSetChange:
    diff = _diff(tool, fields)
    metadata = dict(tool.metadata or {})
    wanted_metadata = fields.get("metadata") or {}
    edited = generated_edited(tool)
    if edited and not overwrite_edited:
        return ToolSetChange(tool.name, "kept", diff)
    for key in GENERATED_METADATA:
        if key in wanted_metadata:
            metadata[key] = wanted_metadata[key]
        else:
            metadata.pop(key, None)
    metadata["generated"] = wanted_metadata["generated"]
    if not diff and metadata == tool.metadata:
        return ToolSetChange(tool.name, "unchanged")
    tool_update(
        tool=tool, description=fields["description"], output_schema=fields.get("output_schema"), metadata=metadata
    )
    return ToolSetChange(tool.name, "update", diff)


def tool_set_create(
    *,
    owner,
    tools: list[dict[str, Any]],
    mcp_instance: McpInstance | None = None,
    overwrite_edited: bool = False,
) -> tuple[list[Tool], list[Binding], list[ToolSetChange]]:
    """Create the tools (each a dict of tool_create's fields), or update the generated tools they regenerate (see
    the module), and bind each to `mcp_instance` where it is not bound yet; all or nothing. Returns the tools
    (created or existing), the bindings made, and what happened to each tool."""
    created: list[Tool] = []
    bindings: list[Binding] = []
    changes: list[ToolSetChange] = []
    with transaction.atomic():
        # One owner's tool sets are created one at a time (PostgreSQL: the owner's row, FOR NO KEY UPDATE, which
        # foreign-key checks do not wait for; SQLite's IMMEDIATE transactions already run one at a time), so two
        # at once cannot both pass the name check below.
        lock_rows_no_key(get_user_model().objects.filter(pk=owner.pk))
        existing = _existing(owner, tools, mcp_instance)
        for fields in tools:
            tool = existing.get(fields["name"])
            if tool is None:
                created.append(tool_create(owner=owner, **fields))
                changes.append(ToolSetChange(fields["name"], "create"))
            else:
                changes.append(_regenerate(tool, fields, overwrite_edited))
                created.append(tool)
        if mcp_instance is not None:
            bound = set(Binding.objects.filter(mcp_instance=mcp_instance).values_list("tool_id", flat=True))
            for tool in created:
                if tool.pk not in bound:
                    bindings.append(binding_create(mcp_instance=mcp_instance, tool=tool))
    return created, bindings, changes
