"""Example arguments built from a JSON Schema alone, for types (and custom schemas) with nothing better."""

from typing import Any


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
    }.get(kind or "", f"<{name}>")
