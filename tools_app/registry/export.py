"""Export tools as LLM function-calling schemas (SPEC §5, §6; seed 004): `mcp`, `openai`, `anthropic`.

- mcp: a `tools/list` entry: {name, description, inputSchema, outputSchema?}.
- openai: Chat Completions tools: {"type": "function", "function": {name, description, parameters}}.
- anthropic: Messages API tools: {name, description, input_schema}.

OpenAI and Anthropic function names must match ^[a-zA-Z0-9_-]{1,64}$, so '.' becomes '_' (SPEC §2.2);
when two names would then collide, the later one gets a numeric suffix. Every renamed tool is listed
in `name_map` ({exported name: toolhub name}) and in `notes`, so a caller can map calls back.

Strict function-calling hosts: every format, and tools/list, writes a type array as `anyOf`
(without_type_arrays); openai and anthropic get an object schema with `properties` at the top.
"""

import re
from typing import Any

from tools_app.grants import listed_input_schema
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.paging import paged_input_schema, paged_output_schema
from tools_app.registry.search import ToolDoc, deep_copy, get_index, make_doc
from tools_app.tool_types import TOOL_TYPES
from tools_app.tool_types.base import ADDITIVE

FORMATS = ("mcp", "openai", "anthropic")
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def validate_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"Unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}.",
            {"formats": list(FORMATS)},
        )
    return fmt


def _function_names(docs: list[ToolDoc]) -> list[str]:
    taken = {doc.name for doc in docs if FUNCTION_NAME.match(doc.name)}
    names = []
    for doc in docs:
        if FUNCTION_NAME.match(doc.name):
            names.append(doc.name)
            continue
        base = re.sub(r"[^a-zA-Z0-9_-]", "_", doc.name)[:64]
        candidate, n = base, 2
        while candidate in taken:
            suffix = f"_{n}"
            candidate, n = base[: 64 - len(suffix)] + suffix, n + 1
        taken.add(candidate)
        names.append(candidate)
    return names


def without_type_arrays(schema: Any) -> Any:
    """`schema` with every `"type": [a, b]` written as `"anyOf": [{"type": a}, {"type": b}]`: the
    same JSON Schema, in the form strict function-calling hosts accept (OpenAI's strict mode, Gemini and
    the agent SDKs built on them refuse type arrays). Returns `schema` itself when it has none, else a copy
    that shares the unchanged parts."""
    if isinstance(schema, list):
        items = [without_type_arrays(item) for item in schema]
        return schema if all(new is old for new, old in zip(items, schema, strict=True)) else items
    if not isinstance(schema, dict):
        return schema
    changed: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, dict | list):
            new = without_type_arrays(value)
            if new is not value:
                changed[key] = new
    kinds = schema.get("type")
    if isinstance(kinds, list):
        result = {key: value for key, value in {**schema, **changed}.items() if key != "type"}
        alternatives = [{"type": kind} for kind in kinds]
        if len(alternatives) == 1:
            return {**result, **alternatives[0]}
        if "anyOf" in result:  # both: every alternative must hold as well
            return {
                **{k: v for k, v in result.items() if k != "anyOf"},
                "allOf": [{"anyOf": alternatives}, {"anyOf": result["anyOf"]}],
            }
        return {**result, "anyOf": alternatives}
    return {**schema, **changed} if changed else schema


def _parameters(schema: dict) -> dict:
    parameters = without_type_arrays(deep_copy(schema)) if schema else {"type": "object"}
    # OpenAI rejects an object schema without `properties`.
    parameters.setdefault("properties", {})
    return parameters


def _entry(doc: ToolDoc, fmt: str, name: str) -> dict[str, Any]:
    if fmt == "mcp":
        entry: dict[str, Any] = {"name": name, "description": doc.description}
        entry["inputSchema"] = without_type_arrays(deep_copy(doc.input_schema))
        if doc.output_schema:
            entry["outputSchema"] = without_type_arrays(deep_copy(doc.output_schema))
        return entry
    if fmt == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": doc.description, "parameters": _parameters(doc.input_schema)},
        }
    return {"name": name, "description": doc.description, "input_schema": _parameters(doc.input_schema)}


def export_docs(docs: list[ToolDoc], fmt: str) -> dict[str, Any]:
    fmt = validate_format(fmt)
    names = [doc.name for doc in docs] if fmt == "mcp" else _function_names(docs)
    tools, name_map, notes = [], {}, []
    for doc, name in zip(docs, names, strict=True):
        tools.append(_entry(doc, fmt, name))
        if name != doc.name:
            name_map[name] = doc.name
            notes.append(f"{doc.name!r} is exported as {name!r}: {fmt} function names allow only a-z A-Z 0-9 _ -.")
    return {"format": fmt, "count": len(tools), "tools": tools, "name_map": name_map, "notes": notes}


def export_tools(*, scope: Any, format: str = "mcp") -> dict[str, Any]:  # noqa: A002 (SPEC §6 parameter name)
    """Every tool of the scope in `format`: {format, count, tools, name_map, notes}.

    Raises ToolError(VALIDATION_ERROR) for an unknown format.
    """
    validate_format(format)
    docs = sorted(get_index(scope).docs, key=lambda doc: (doc.name.lower(), doc.position))
    return export_docs(docs, format)


def export_tool(*, tool: Any, format: str = "mcp") -> dict[str, Any]:  # noqa: A002
    """One tool (under its own name) in `format`, in the same shape as export_tools."""
    return export_docs([make_doc(0, tool.name, tool.description, tool)], format)


#
# tools/list entries (SPEC §4.3): the MCP endpoint lists these, the admin estimates their size
#


def _annotations(tool_type: str) -> dict[str, bool]:
    spec = TOOL_TYPES.get(tool_type)
    return dict(spec.annotations if spec is not None else ADDITIVE)


def output_schema_for(schema: dict[str, Any]) -> dict[str, Any]:
    """The outputSchema clients validate structuredContent against: non-object results are wrapped (SPEC §4.4)."""
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def tool_entry(binding: Any) -> dict[str, Any]:
    """One tools/list entry: effective name and description, schemas, annotations. A pageable tool's schemas
    say it pages (docs/paging.md): the `cursor` argument, and a page as an alternative output. The binding's
    pinned arguments are not in its input schema (tools_app.grants)."""
    tool = binding.tool
    spec = TOOL_TYPES.get(tool.type)
    pageable = spec is not None and spec.pageable
    schema = listed_input_schema(tool.input_schema, binding.pinned_arguments)
    entry: dict[str, Any] = {
        "name": binding.effective_name,
        "description": binding.effective_description,
        # No type arrays, for strict function-calling hosts (without_type_arrays).
        "inputSchema": without_type_arrays(paged_input_schema(schema) if pageable else schema),
        "annotations": _annotations(tool.type),
    }
    if tool.alias:
        entry["title"] = tool.alias
    if tool.output_schema:
        output = output_schema_for(tool.output_schema)
        output = {"type": "object", **(paged_output_schema(output) or {})} if pageable else output
        entry["outputSchema"] = without_type_arrays(output)
    return entry
