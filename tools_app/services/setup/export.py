"""A setup document from an owner's rows (setup_export)."""

from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError

from tools_app.models import McpInstance, Table, Tool
from tools_app.services import table_log
from tools_app.services.setup.document import (
    BINDING_KEYS,
    INSTANCE_KEYS,
    OPTIONAL_INSTANCE_KEYS,
    PROMPT_KEYS,
    SETUP_VERSION,
    TABLE_KEYS,
)

__all__ = ["setup_export"]


def _unique_names(kind: str, field_name: str, rows: Iterable[tuple[int, str]]) -> None:
    """A document names each table (tool) once: two of the owner's with one name cannot be exported."""
    seen: dict[str, int] = {}
    for pk, name in rows:
        if name in seen:
            raise ValidationError(
                {
                    kind: ValidationError(
                        "Your %(kind)s %(first)d and %(second)d are both named %(name)r: a setup document names each "
                        "one once (by its %(field)s), so rename one first.",
                        code="duplicate",
                        params={"kind": kind, "first": seen[name], "second": pk, "name": name, "field": field_name},
                    )
                }
            )
        seen[name] = pk


def _table_entry(table: Table, with_data: bool, data_of: Callable[[Table], Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {key: getattr(table, key) for key in TABLE_KEYS}
    if with_data:
        entry["data"] = data_of(table) if data_of is not None else table_log.table_data(table.pk)[1]
    return entry


def _tool_entry(tool: Tool, table_names: dict[int, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tool.name,
        "type": tool.type,
        "table": table_names.get(tool.table_id) if tool.table_id is not None else None,
        "json_path": tool.json_path,
        "description": tool.description,
        "alias": tool.alias,
        "input_schema": tool.input_schema,
        "metadata": tool.metadata,
    }
    if tool.output_schema is not None:
        entry["output_schema"] = tool.output_schema
    if tool.redact_arguments:
        entry["redact_arguments"] = tool.redact_arguments
    return entry


def _instance_entry(instance: McpInstance, tool_names: dict[int, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {key: getattr(instance, key) for key in INSTANCE_KEYS}
    for key in OPTIONAL_INSTANCE_KEYS:
        if entry[key] is None:
            del entry[key]
    bindings = instance.bindings.select_related("tool").order_by("name_key", "pk")
    entry["bindings"] = [
        {
            "tool": tool_names.get(binding.tool_id, binding.tool.name),
            **{k: getattr(binding, k) for k in BINDING_KEYS[1:]},
        }
        for binding in bindings
    ]
    prompts = instance.prompts.order_by("name", "pk")
    entry["prompts"] = [{key: getattr(prompt, key) for key in PROMPT_KEYS} for prompt in prompts]
    return entry


def setup_export(
    *,
    owner,
    instance_slug: str | None = None,
    with_data: bool = False,
    data_of: Callable[[Table], Any] | None = None,
) -> dict[str, Any]:
    """The owner's setup as a document (the module's format): every table, tool and instance of the owner, or one
    instance (`instance_slug`, McpInstance.DoesNotExist if it is not the owner's) with the tools it binds and their
    tables. Table data only `with_data`: each table's current document, or what `data_of(table)` gives in its place
    (the API streams a rows table's records there); API keys never. A ValidationError when two exported tables
    (tools) share a name."""
    instances = McpInstance.objects.filter(owner=owner).order_by("slug")
    if instance_slug is not None:
        instances = instances.filter(pk=McpInstance.objects.get(owner=owner, slug=instance_slug).pk)
        tools = Tool.objects.filter(owner=owner, bindings__mcp_instance__in=instances).distinct()
        tables = Table.objects.filter(owner=owner, tools__in=tools).distinct()
        scope: Any = {"instance": instance_slug}
    else:
        tools = Tool.objects.filter(owner=owner)
        tables = Table.objects.filter(owner=owner)
        scope = "owner"
    tables = tables.order_by("name", "pk")
    tools = tools.order_by("name", "pk")
    _unique_names("tables", "name", tables.values_list("pk", "name"))
    _unique_names("tools", "name", tools.values_list("pk", "name"))
    table_names = dict(Table.objects.filter(owner=owner).values_list("pk", "name"))
    tool_names = dict(tools.values_list("pk", "name"))
    return {
        "toolhub_setup": SETUP_VERSION,
        "scope": scope,
        "tables": [_table_entry(table, with_data, data_of) for table in tables],
        "tools": [_tool_entry(tool, table_names) for tool in tools],
        "instances": [_instance_entry(instance, tool_names) for instance in instances],
    }
