"""get_tool_usage_guide: a Markdown guide to the scope's tools."""

from typing import Any

from tools_app.tool_types.base import READ_ONLY, REGISTRY, ToolTypeSpec
from tools_app.tool_types.registry_family import REGISTRY_HELP


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"tool_names": [tool.name]}


def markdown_of(value: dict[str, Any]) -> str | None:
    """The guide's content, its warnings appended: unknown names are warnings, not errors (SPEC §5), and the
    model reads only the text."""
    content = value.get("content")
    if not isinstance(content, str):
        return None
    warnings = [str(warning) for warning in value.get("warnings") or ()]
    if warnings:
        content = content.rstrip("\n") + "\n\n## Warnings\n\n" + "".join(f"- {w}\n" for w in warnings)
    return content


SPEC = ToolTypeSpec(
    value="get_tool_usage_guide",
    label="Registry: get tool usage guide",
    kind=REGISTRY,
    input_schema={
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
    annotations=READ_ONLY,
    help=REGISTRY_HELP,
    example=example,
    returns="This guide: `content` (Markdown), `warnings`, `metadata`.",
    narrowing_hint="name only the tools you need in `tool_names`, or pass one `category`",
    markdown_of=markdown_of,
)
