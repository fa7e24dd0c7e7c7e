"""Example arguments for one tool, for the admin's try-it page: placeholders that fit the tool.

Built by the tool's type (its spec's example builder, tools_app.tool_types) from the data at its mount (the
keys and fields that are really there; records for an array mount, {"key", "content"} pairs for an object
mount), and checked against its input schema: an example a custom schema refuses is replaced by one built
from the schema itself. Presentation only: nothing here runs or writes anything.
"""

from typing import Any

from tools_app.data_access.pointer import parse, resolve
from tools_app.kernel.errors import ToolError
from tools_app.models import Tool
from tools_app.safe_schema import validator_for
from tools_app.services import table_data_sampled
from tools_app.tool_types import TOOL_TYPES
from tools_app.tool_types.examples import from_schema

_UNKNOWN = object()


def mount_value(tool: Tool) -> Any:
    """The value at a data tool's mount (a rows table's collection: its first records), or _UNKNOWN (no table, or
    the mount does not exist now)."""
    if not tool.is_data_tool or tool.table_id is None:
        return _UNKNOWN
    _, data, _counts = table_data_sampled(tool.table_id)
    try:
        return resolve(data, parse(tool.json_path), tool.json_path)
    except ToolError:
        return _UNKNOWN


def example_arguments(tool: Tool, mount: Any = _UNKNOWN) -> dict[str, Any]:
    """Arguments worth trying on `tool`: from its type and `mount` (see mount_value), fitting its schema."""
    example = _by_type(tool, mount)
    schema = tool.input_schema or {}
    if _fits(schema, example):
        return example
    # A custom schema: its required arguments, keeping the type's values for the arguments it names.
    properties = schema.get("properties") or {}
    merged = {**from_schema(schema), **{name: value for name, value in example.items() if name in properties}}
    return merged if _fits(schema, merged) else from_schema(schema)


def _fits(schema: dict[str, Any], arguments: dict[str, Any]) -> bool:
    try:
        return validator_for(schema).is_valid(arguments)  # never fetches a $ref
    except Exception:  # a schema that cannot be applied (saved schemas are checked): no opinion
        return True


def _by_type(tool: Tool, mount: Any) -> dict[str, Any]:
    """The type's own example (tools_app.tool_types), or one from the schema for a value that is no type."""
    spec = TOOL_TYPES.get(tool.type)
    if spec is None:
        return from_schema(tool.input_schema or {})
    return spec.example(tool, mount)


__all__ = ["example_arguments", "from_schema", "mount_value"]
