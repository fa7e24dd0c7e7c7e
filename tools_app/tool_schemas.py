"""Default input schemas per tool type (SPEC §3.2) and the arguments each type needs."""

import copy
from typing import Any

from .choices import ToolType

_KEY = {"type": ["string", "integer", "number"], "description": "A key; numbers and strings compare as strings."}
_NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}

DEFAULT_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    ToolType.GET_DATA_SCHEMA: _NO_ARGUMENTS,
    ToolType.GET_ALL_DATA: _NO_ARGUMENTS,
    ToolType.QUERY_DATA: {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "A JMESPath expression evaluated over the data, e.g. \"[?status=='paid'].id\".",
            }
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    ToolType.PREVIEW: {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many elements."},
            "offset": {"type": "integer", "minimum": 0, "description": "How many elements to skip."},
        },
        "additionalProperties": False,
    },
    ToolType.SELECT: {
        "type": "object",
        "properties": {
            "keys": {"type": "array", "items": _KEY, "minItems": 1, "description": "The keys to fetch."},
            "field": {"type": "string", "minLength": 1, "description": "Field compared with the keys."},
        },
        "required": ["keys"],
        "additionalProperties": False,
    },
    ToolType.CREATE: {
        "type": "object",
        "properties": {
            "elements": {
                "type": "array",
                "minItems": 1,
                "description": 'Elements to add: records for a list, {"key", "content"} pairs for an object.',
            }
        },
        "required": ["elements"],
        "additionalProperties": False,
    },
    ToolType.UPDATE: {
        "type": "object",
        "properties": {
            "elements": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object"},
                "description": 'Patches (JSON Merge Patch): records holding their key, or {"key", "content"} pairs.',
            }
        },
        "required": ["elements"],
        "additionalProperties": False,
    },
    ToolType.DELETE: {
        "type": "object",
        "properties": {"keys": {"type": "array", "items": _KEY, "minItems": 1, "description": "Keys to remove."}},
        "required": ["keys"],
        "additionalProperties": False,
    },
    ToolType.SEARCH_TOOLS: {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What the tool should do, or a pattern."},
            "search_method": {
                "type": "string",
                # No "enum": SPEC §5 answers an unknown method with INVALID_SEARCH_METHOD, not a schema error.
                "default": "bm25",
                "description": "One of: regex, bm25 (keywords), embedding (meaning), hybrid (bm25 + embedding).",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    ToolType.GET_TOOL_DEFINITION: {
        "type": "object",
        "properties": {"tool_name": {"type": "string", "minLength": 1, "description": "The tool's name."}},
        "required": ["tool_name"],
        "additionalProperties": False,
    },
    ToolType.LIST_TOOLS_BY_CATEGORY: {
        "type": "object",
        "properties": {
            "category": {"type": "string", "minLength": 1, "description": 'A category, or "all".'},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20},
        },
        "required": ["category"],
        "additionalProperties": False,
    },
    ToolType.GET_TOOL_USAGE_GUIDE: {
        "type": "object",
        "properties": {
            "tool_names": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Tools to cover (all if empty).",
            },
            "category": {"type": "string", "description": "Only tools of this category."},
        },
        "additionalProperties": False,
    },
    ToolType.REGISTER_TOOL: {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Tool name: letters, digits, '_', '.', '-' (1–64)."},
            "description": {"type": "string", "description": "What the tool does, for a model."},
            "category": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "input_schema": {"type": "object", "description": "JSON Schema of the tool's arguments."},
            "mcp_server": {"type": "string", "description": "Where the tool is served."},
        },
        "required": ["name", "description"],
        "additionalProperties": False,
    },
    ToolType.EXTERNAL: {"type": "object"},
}


def default_input_schema(tool_type: str) -> dict[str, Any]:
    """A fresh copy of the type's default input schema."""
    return copy.deepcopy(DEFAULT_INPUT_SCHEMAS.get(tool_type, {"type": "object"}))


def required_arguments(tool_type: str) -> list[str]:
    """Arguments a custom schema for this type must still accept."""
    return list(DEFAULT_INPUT_SCHEMAS.get(tool_type, {}).get("required", []))


def is_other_types_default(schema: Any, tool_type: str) -> bool:
    """Whether `schema` is the untouched default of another type (the bare external default aside)."""
    return any(
        schema == default
        for other, default in DEFAULT_INPUT_SCHEMAS.items()
        if other not in (tool_type, ToolType.EXTERNAL)
    )
