"""external: a tool served by another MCP server, catalogued here but never called through toolhub."""

from typing import Any

from .base import ADDITIVE, EXTERNAL, ToolTypeSpec


def execute(*, tool: Any, arguments: Any, scope: Any = None) -> Any:
    """Refuses: the tool runs on its own server (checked before its arguments)."""
    from ..errors import ErrorCode, ToolError

    where = (tool.metadata or {}).get("mcp_server") or "another MCP server"
    raise ToolError(
        ErrorCode.TOOL_NOT_CALLABLE,
        f"The tool {tool.name!r} is an external tool served by {where}; call it there, not through toolhub.",
        {"mcp_server": where},
    )


def example(tool: Any, mount: Any) -> dict[str, Any]:
    from .examples import from_schema

    return from_schema(tool.input_schema or {})


SPEC = ToolTypeSpec(
    value="external",
    label="External (served elsewhere)",
    kind=EXTERNAL,
    input_schema={"type": "object"},
    execute=execute,
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
