"""Default input schemas per tool type (SPEC §3.2) and the arguments each type needs."""

import copy
from typing import Any

from tools_app.choices import ToolType
from tools_app.tool_types import TOOL_TYPES


def default_input_schema(tool_type: str) -> dict[str, Any]:
    """A fresh copy of the type's default input schema (its declaration's, tools_app.tool_types)."""
    spec = TOOL_TYPES.get(tool_type)
    return copy.deepcopy(spec.input_schema if spec is not None else {"type": "object"})


def required_arguments(tool_type: str) -> list[str]:
    """Arguments a custom schema for this type must still accept."""
    spec = TOOL_TYPES.get(tool_type)
    return spec.required_arguments if spec is not None else []


def is_other_types_default(schema: Any, tool_type: str) -> bool:
    """Whether `schema` is the untouched default of another type (the bare external default aside)."""
    return any(
        schema == spec.input_schema for other, spec in TOOL_TYPES.items() if other not in (tool_type, ToolType.EXTERNAL)
    )


def _types(schema: Any) -> set[str] | None:
    """The JSON types a property schema admits (integer counted in number), or None when it says none."""
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    declared = schema["type"]
    types = set(declared if isinstance(declared, list) else [declared])
    return {str(value) for value in types}


def _admits(old: set[str], new: set[str]) -> bool:
    """Whether every value of the `old` types is still a value of the `new` ones ("integer" is in "number")."""
    return all(kind in new or (kind == "integer" and "number" in new) for kind in old)


def input_schema_breaks(old: Any, new: Any) -> list[str]:
    """How a change of a tool's input schema from `old` to `new` refuses calls that `old` accepted: a required
    argument added, a property removed, a property's type narrowed, undeclared arguments no longer allowed. Each
    reason is one sentence naming the argument; empty when every argument `old` declared is still declared and
    accepted as far as these rules see. The change guard asks it: a breaking change of a tool in use needs a
    confirmation."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    reasons: list[str] = []
    old_properties: dict[str, Any] = old["properties"] if isinstance(old.get("properties"), dict) else {}
    new_properties: dict[str, Any] = new["properties"] if isinstance(new.get("properties"), dict) else {}
    old_required = set(old.get("required") or []) if isinstance(old.get("required"), list) else set()
    new_required = set(new.get("required") or []) if isinstance(new.get("required"), list) else set()
    for name in sorted(new_required - old_required, key=str):
        reasons.append(f"The argument {name!r} is now required.")
    closed = new.get("additionalProperties") is False
    for name in sorted(old_properties):
        if name not in new_properties:
            # Still accepted by an open schema, but no longer declared: a caller's value means nothing now.
            reasons.append(f"The argument {name!r} was removed.")
            continue
        before, after = _types(old_properties[name]), _types(new_properties[name])
        if after is not None and (before is None or not _admits(before, after)):
            was = "any type" if before is None else "|".join(sorted(before))
            reasons.append(f"The argument {name!r} narrowed from {was} to {'|'.join(sorted(after))}.")
    if closed and old.get("additionalProperties") is not False:
        reasons.append("Arguments the schema does not declare are no longer allowed.")
    return reasons
