"""register_tool: catalogues an external tool in the registry (it writes)."""

from typing import Any

from tools_app.tool_types.base import ADDITIVE, REGISTRY, ToolTypeSpec
from tools_app.tool_types.registry_family import REGISTRY_HELP, markdown_field


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {
        "name": "weather_lookup",
        "description": "Current weather for a city.",
        "category": "external",
        "tags": ["weather"],
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "mcp_server": "https://weather.example.com/mcp/",
    }


SPEC = ToolTypeSpec(
    value="register_tool",
    label="Registry: register tool",
    kind=REGISTRY,
    input_schema={
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
    annotations=ADDITIVE,
    help=REGISTRY_HELP,
    example=example,
    returns="The registered tool's name and id.",
    changes_data=True,
    markdown_of=markdown_field,
)
