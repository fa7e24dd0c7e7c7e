"""Example arguments for one tool, for the admin's try-it page (QA item 6): placeholders that fit the tool.

Built from the tool's type and the data at its mount (the keys and fields that are really there; records
for an array mount, {"key", "content"} pairs for an object mount), and checked against its input schema: an
example a custom schema refuses is replaced by one built from the schema itself. Presentation only: nothing
here runs or writes anything.
"""

from typing import Any

from jsonschema import Draft202012Validator

from tools_app.choices import ToolType
from tools_app.data_access import ToolError
from tools_app.data_access.pointer import parse, resolve
from tools_app.models import Tool
from tools_app.services import table_data

# How many keys a select/delete example names, and how many scalar fields a record example keeps.
EXAMPLE_KEYS = 2
EXAMPLE_FIELDS = 3
_UNKNOWN = object()


def mount_value(tool: Tool) -> Any:
    """The value at a data tool's mount, or _UNKNOWN (no table, or the mount does not exist now)."""
    if not tool.is_data_tool or tool.table_id is None:
        return _UNKNOWN
    _, data = table_data(tool.table_id)
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
        return Draft202012Validator(schema).is_valid(arguments)
    except Exception:  # a schema jsonschema cannot apply (saved schemas are checked): no opinion
        return True


def _by_type(tool: Tool, mount: Any) -> dict[str, Any]:
    kind = tool.type
    if kind in (ToolType.GET_DATA_SCHEMA, ToolType.GET_ALL_DATA):
        return {}
    if kind == ToolType.PREVIEW:
        return {"limit": 5, "offset": 0}
    if kind in (ToolType.QUERY_DATA, ToolType.SELECT, ToolType.CREATE, ToolType.UPDATE, ToolType.DELETE):
        return _data_example(kind, tool.key_field, mount)
    return _registry_example(tool)


def _data_example(kind: str, key_field: str, mount: Any) -> dict[str, Any]:
    # Keys and fields in sorted order: PostgreSQL's jsonb does not keep an object's key order, and the
    # example must be the same on every backend.
    is_object = isinstance(mount, dict)
    if is_object:
        all_keys = sorted(mount)
        first = mount[all_keys[0]] if all_keys else {}
    else:
        records = [item for item in mount if isinstance(item, dict)] if isinstance(mount, list) else []
        all_keys = [record[key_field] for record in records if key_field in record]
        first = records[0] if records else {}
    keys = all_keys[:EXAMPLE_KEYS]
    fields = _scalar_fields(first, skip=key_field)
    if kind == ToolType.QUERY_DATA:
        if is_object:
            return {"query": "keys(@)"}
        return {"query": f"[].{key_field}" if keys else "length(@)"}
    if kind in (ToolType.SELECT, ToolType.DELETE):
        return {"keys": keys or [1]}
    if kind == ToolType.CREATE:
        new_key = _new_key(all_keys)
        if is_object:
            return {"elements": [{"key": new_key, "content": fields if isinstance(first, dict) else first}]}
        return {"elements": [{key_field: new_key, **fields}]}
    # update: one changed field of the first element
    change = dict(list(fields.items())[:1])
    key = keys[0] if keys else 1
    if is_object:
        return {"elements": [{"key": key, "content": change}]}
    return {"elements": [{key_field: key, **change}]}


def _scalar_fields(value: Any, *, skip: str) -> dict[str, Any]:
    """Up to EXAMPLE_FIELDS fields (by name) of an object whose values are strings, numbers or booleans."""
    if not isinstance(value, dict):
        return {}
    names = sorted(k for k, v in value.items() if k != skip and isinstance(v, str | int | float | bool))
    return {name: value[name] for name in names[:EXAMPLE_FIELDS]}


def _new_key(existing: list[Any]) -> Any:
    """A key that is not taken: the next integer after integer keys, otherwise "new-1", "new-2", ..."""
    if existing and all(isinstance(key, int) and not isinstance(key, bool) for key in existing):
        return max(existing) + 1
    taken = {str(key) for key in existing}
    n = 1
    while f"new-{n}" in taken:
        n += 1
    return f"new-{n}"


def _registry_example(tool: Tool) -> dict[str, Any]:
    kind = tool.type
    if kind == ToolType.SEARCH_TOOLS:
        return {"query": "orders by status", "search_method": "bm25", "limit": 5}
    if kind == ToolType.GET_TOOL_DEFINITION:
        return {"tool_name": tool.name}
    if kind == ToolType.LIST_TOOLS_BY_CATEGORY:
        return {"category": "all"}
    if kind == ToolType.GET_TOOL_USAGE_GUIDE:
        return {"tool_names": [tool.name]}
    if kind == ToolType.REGISTER_TOOL:
        return {
            "name": "weather_lookup",
            "description": "Current weather for a city.",
            "category": "external",
            "tags": ["weather"],
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "mcp_server": "https://weather.example.com/mcp/",
        }
    return from_schema(tool.input_schema or {})


def from_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema's required properties with a value each: its default, first enum value or example, else
    a placeholder of its type."""
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if name in properties] or list(properties)[:1]
    return {name: _placeholder(name, properties[name]) for name in required}


def _placeholder(name: str, prop: Any) -> Any:
    if not isinstance(prop, dict):
        return f"<{name}>"
    if "default" in prop:
        return prop["default"]
    if prop.get("enum"):
        return prop["enum"][0]
    if prop.get("examples"):
        return prop["examples"][0]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return {
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "array": [],
        "object": {},
    }.get(kind, f"<{name}>")


__all__ = ["example_arguments", "from_schema", "mount_value"]
