"""external: a tool served by another MCP server, catalogued here but never called through toolhub."""

from typing import Any

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.tool_types.base import ADDITIVE, EXTERNAL, ToolTypeSpec
from tools_app.tool_types.examples import from_schema


def refusal(tool: Any, name: str | None = None) -> Any:
    """TOOL_NOT_CALLABLE naming where the tool is served; `name` is the one it was called by (an MCP
    binding's override), the tool's own name by default. The call pipeline refuses with it too."""
    where = (tool.metadata or {}).get("mcp_server") or "another MCP server"
    return ToolError(
        ErrorCode.TOOL_NOT_CALLABLE,
        f"The tool {name or tool.name!r} is an external tool served by {where}; call it there, not through toolhub.",
        {"mcp_server": where},
    )


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return from_schema(tool.input_schema or {})


SPEC = ToolTypeSpec(
    value="external",
    label="External (served elsewhere)",
    kind=EXTERNAL,
    input_schema={"type": "object"},
    # Never listed by tools/list; the hints are those of a tool that may add.
    annotations=ADDITIVE,
    help={
        "summary": "A tool served by another MCP server (metadata.mcp_server). It is catalogued for search, "
        "definitions, the guide and export, but never listed by tools/list nor callable here.",
        "example": "",
        "topics": [],
    },
    example=example,
    returns="Whatever the tool's own server returns (it is not called through toolhub).",
    requires_description=False,
)
