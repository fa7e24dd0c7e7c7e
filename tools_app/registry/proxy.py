"""The call proxy (`call_tool`): in search mode an instance lists only its registry tools, and many clients
only call a tool they listed, so a found tool is run through `call_tool` by name (mcp_app.handlers)."""

from typing import Any

from tools_app.models import Discovery

PROXY_NAME = "call_tool"
PROXY_HINT = (
    f"Run a tool found here with `{PROXY_NAME}`: "
    '{"tool_name": "<name>", "arguments": {...}} (get_tool_definition gives its input schema).'
)


def through_proxy(scope: Any) -> bool:
    """Whether the scope is an MCP instance in search mode, whose clients run tools through call_tool."""
    instance = getattr(scope, "instance", None)
    return instance is not None and instance.discovery == Discovery.SEARCH
