"""Default input schemas per tool type (SPEC §3.2) and the arguments each type needs."""

import copy
from typing import Any

from tools_app.choices import ToolType
from tools_app.tool_types import TOOL_TYPES

# The defaults from the tool types' registry; the same objects as the specs' schemas.
DEFAULT_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {value: spec.input_schema for value, spec in TOOL_TYPES.items()}


def default_input_schema(tool_type: str) -> dict[str, Any]:
    """A fresh copy of the type's default input schema."""
    return copy.deepcopy(DEFAULT_INPUT_SCHEMAS.get(tool_type, {"type": "object"}))


def required_arguments(tool_type: str) -> list[str]:
    """Arguments a custom schema for this type must still accept."""
    spec = TOOL_TYPES.get(tool_type)
    return spec.required_arguments if spec is not None else []


def is_other_types_default(schema: Any, tool_type: str) -> bool:
    """Whether `schema` is the untouched default of another type (the bare external default aside)."""
    return any(
        schema == default
        for other, default in DEFAULT_INPUT_SCHEMAS.items()
        if other not in (tool_type, ToolType.EXTERNAL)
    )
