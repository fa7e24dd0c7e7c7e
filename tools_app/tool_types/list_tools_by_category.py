"""list_tools_by_category: a category's tools, or every category with its count."""

from typing import Any

from tools_app.tool_types.base import READ_ONLY, REGISTRY, ToolTypeSpec
from tools_app.tool_types.registry_family import REGISTRY_HELP, markdown_field


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"category": "all"}


SPEC = ToolTypeSpec(
    value="list_tools_by_category",
    label="Registry: list tools by category",
    kind=REGISTRY,
    input_schema={
        "type": "object",
        "properties": {
            "category": {"type": "string", "minLength": 1, "description": 'A category, or "all".'},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20},
        },
        "required": ["category"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help=REGISTRY_HELP,
    example=example,
    returns="The category's tools, or every category with its count for `all`.",
    narrowing_hint="pass a smaller `limit` (the default is 20), or a category with fewer tools",
    markdown_of=markdown_field,
)
