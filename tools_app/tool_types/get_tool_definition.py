"""get_tool_definition: one tool's full definition."""

from typing import Any

from tools_app.tool_types.base import READ_ONLY, REGISTRY, ToolTypeSpec
from tools_app.tool_types.registry_family import REGISTRY_HELP, markdown_field


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"tool_name": tool.name}


SPEC = ToolTypeSpec(
    value="get_tool_definition",
    label="Registry: get tool definition",
    kind=REGISTRY,
    input_schema={
        "type": "object",
        "properties": {"tool_name": {"type": "string", "minLength": 1, "description": "The tool's name."}},
        "required": ["tool_name"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help=REGISTRY_HELP,
    example=example,
    returns="The tool's name, description, input and output schemas, category, tags, server.",
    narrowing_hint=(
        "one tool's definition cannot be split; use the summary that search_tools or list_tools_by_category"
        " give, or ask the instance's owner to raise max_result_bytes"
    ),
    markdown_of=markdown_field,
)
