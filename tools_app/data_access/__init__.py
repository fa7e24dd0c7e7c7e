"""The data-access layer: ONE entry point, `execute(tool=, arguments=)`, runs every tool type.

Shared by the MCP endpoint, the API's `call` action and the admin's "try it". Callers pass a Tool
already fetched through the ownership rule (`for_user`); this layer never sees a request, a
serializer or an MCP object. Every outcome is JSON-able data or a ToolError.
"""

from typing import Any

from ..choices import DATA_TYPES, REGISTRY_TYPES, ToolType
from ..models import Table, Tool
from .arguments import validate_arguments
from .errors import ErrorCode, ToolError
from .operations import READERS, WRITERS, Mount, preview

__all__ = ["ErrorCode", "ToolError", "execute"]


def execute(*, tool: Tool, arguments: Any, scope: Any = None) -> Any:
    """Validate `arguments` against the tool's schema and run it; return its JSON result.

    `scope` is what registry tools work over (an MCP instance, or a user over the API); data tools
    ignore it. Raises ToolError with a code (SPEC §8); a failed write leaves data and version as
    they were.
    """
    if tool.type == ToolType.EXTERNAL:
        where = (tool.metadata or {}).get("mcp_server") or "another MCP server"
        raise ToolError(
            ErrorCode.TOOL_NOT_CALLABLE,
            f"The tool {tool.name!r} is an external tool served by {where}; call it there, not through toolhub.",
            {"mcp_server": where},
        )
    arguments = validate_arguments(schema=tool.input_schema, tool_type=tool.type, arguments=arguments)
    if tool.type in REGISTRY_TYPES:
        from ..registry import execute_registry_tool  # the registry builds on this layer, not the reverse

        return execute_registry_tool(tool=tool, arguments=arguments, scope=scope)
    if tool.type not in DATA_TYPES:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, f"The tool type {tool.type!r} cannot be run.")
    return _execute_data_tool(tool, arguments)


def _execute_data_tool(tool: Tool, arguments: dict) -> Any:
    from .. import services  # services imports this package's cache; import here to keep the cycle out

    if tool.table_id is None:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The tool {tool.name!r} has no table.")
    mount = Mount(tool.json_path, tool.key_field)
    try:
        if tool.type in WRITERS:
            build, verb = WRITERS[tool.type]
            version, count = services.table_write(table_id=tool.table_id, change=build(mount, arguments))
            return {verb: count, "version": version}
        version, data = services.table_data(tool.table_id)
    except Table.DoesNotExist as exc:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The table of the tool {tool.name!r} no longer exists.") from exc
    if tool.type == ToolType.PREVIEW:
        return preview(data, mount, arguments, (tool.metadata or {}).get("preview_keys"))
    if tool.type == ToolType.GET_DATA_SCHEMA:
        return services.table_derived(
            tool.table_id, version, ("shape", tool.json_path), lambda: READERS[tool.type](data, mount, arguments)
        )
    return READERS[tool.type](data, mount, arguments)
