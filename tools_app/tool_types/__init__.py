"""The tool types (SPEC §3.2), one module each, registered here.

Every declared face of a type (kind, default category, default input schema, table rule, validation,
tools/list annotations, admin help and try-it example, guide text, narrowing hint, Markdown of its
results) lives in its module's SPEC; nothing here runs a tool or imports a model. Adding a type is one
new module plus one line in _MODULES, its executor (one line of tools_app.execution.executors.EXECUTORS),
and its ToolType choice with its migration; a test walks all three (tests/tool_types/test_every_type.py), and
one registers a stand-in read type by its declaration and executor line alone (test_new_read_type.py).
"""

from typing import Any

from tools_app.tool_types import (
    create,
    delete,
    external,
    get_all_data,
    get_data_schema,
    get_tool_definition,
    get_tool_usage_guide,
    list_tools_by_category,
    preview,
    query_data,
    register_tool,
    search_tools,
    select,
    update,
)
from tools_app.tool_types.base import (
    DATA_KINDS,
    EXTERNAL,
    KINDS,
    READ,
    REGISTRY,
    WRITE,
    Problem,
    ToolTypeSpec,
    description_problems,
)
from tools_app.tool_types.base import table_problems as _table_problems

_MODULES = (
    get_data_schema,
    get_all_data,
    query_data,
    preview,
    select,
    create,
    update,
    delete,
    search_tools,
    get_tool_definition,
    list_tools_by_category,
    get_tool_usage_guide,
    register_tool,
    external,
)

TOOL_TYPES: dict[str, ToolTypeSpec] = {module.SPEC.value: module.SPEC for module in _MODULES}


def spec_for(tool_type: str) -> ToolTypeSpec:
    """The spec of a registered type; KeyError for any other value."""
    return TOOL_TYPES[tool_type]


def types_of_kind(*kinds: str) -> frozenset[str]:
    return frozenset(value for value, spec in TOOL_TYPES.items() if spec.kind in kinds)


# Asked of TOOL_TYPES when a call runs, not kept from import: a type is a read, or pageable, by its declaration
# alone, and no other module lists the types of either (the call pipeline, the executors and the narrowing rule
# ask these).


def is_read(tool_type: str | None) -> bool:
    """Whether `tool_type` is a registered type of kind READ (it reads a table; a binding may narrow it)."""
    spec = TOOL_TYPES.get(tool_type) if tool_type is not None else None
    return spec is not None and spec.kind == READ


def is_pageable(tool_type: str | None) -> bool:
    """Whether a call of `tool_type` may answer a list that is paged (ToolTypeSpec.pageable; docs/paging.md)."""
    spec = TOOL_TYPES.get(tool_type) if tool_type is not None else None
    return spec is not None and spec.pageable


def check_tool(tool: Any) -> list[Problem]:
    """The rules of the tool's type; an unknown type (refused by the field's choices) has no table and needs
    a description."""
    spec = TOOL_TYPES.get(tool.type)
    if spec is not None:
        return spec.check(tool)
    return _table_problems(tool, needs_table=False) + description_problems(tool, required=True)


def check_arguments(tool: Any) -> list[Problem]:
    """The arguments the tool's type needs that its (valid) input schema does not declare."""
    spec = TOOL_TYPES.get(tool.type)
    return spec.argument_problems(tool) if spec is not None else []


__all__ = [
    "DATA_KINDS",
    "EXTERNAL",
    "KINDS",
    "READ",
    "REGISTRY",
    "TOOL_TYPES",
    "WRITE",
    "ToolTypeSpec",
    "check_arguments",
    "check_tool",
    "is_pageable",
    "is_read",
    "spec_for",
    "types_of_kind",
]
