"""The data-access layer: ONE entry point, `execute(tool=, arguments=)`, runs every tool type.

Shared by the MCP endpoint, the API's `call` action and the admin's "try it". Callers pass a Tool
already fetched through the ownership rule (`for_user`); this layer never sees a request, a
serializer or an MCP object. Every outcome is JSON-able data or a ToolError. What a type does is
its spec's `execute` (tools_app.tool_types); the data types run through read_mount and write_mount.
"""

from collections.abc import Callable
from typing import Any

from ..models import Table, Tool
from ..tool_types import EXTERNAL, TOOL_TYPES
from .arguments import validate_arguments
from .errors import ErrorCode, ToolError
from .operations import Mount

__all__ = ["ErrorCode", "ToolError", "execute", "read_mount", "write_mount"]


def execute(*, tool: Tool, arguments: Any, scope: Any = None) -> Any:
    """Validate `arguments` against the tool's schema and run it; return its JSON result.

    `scope` is what registry tools work over (an MCP instance, or a user over the API); data tools
    ignore it. Raises ToolError with a code (SPEC §8); a failed write leaves data and version as
    they were.
    """
    spec = TOOL_TYPES.get(tool.type)
    if spec is not None and spec.kind == EXTERNAL:
        return spec.execute(tool=tool, arguments=arguments, scope=scope)  # refused before its arguments
    arguments = validate_arguments(schema=tool.input_schema, tool_type=tool.type, arguments=arguments)
    if spec is None:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, f"The tool type {tool.type!r} cannot be run.")
    return spec.execute(tool=tool, arguments=arguments, scope=scope)


def _mount(tool: Tool) -> Mount:
    if tool.table_id is None:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The tool {tool.name!r} has no table.")
    return Mount(tool.json_path, tool.key_field)


def _table_gone(tool: Tool, exc: Exception) -> ToolError:
    return ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The table of the tool {tool.name!r} no longer exists.")


def read_mount(tool: Tool) -> tuple[Mount, int, Any]:
    """A data tool's mount with its table's current version and data."""
    from .. import services  # services imports this package's cache; import here to keep the cycle out

    mount = _mount(tool)
    if tool.table_id is None:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The tool {tool.name!r} has no table.")
    try:
        version, data = services.table_data(tool.table_id)
    except Table.DoesNotExist as exc:
        raise _table_gone(tool, exc) from exc
    return mount, version, data


def write_mount(tool: Tool, build: Callable[[Mount, dict], Any], arguments: dict, verb: str) -> dict[str, int]:
    """Apply the change `build(mount, arguments)` under the table's lock: {verb: count, "version": new}."""
    from .. import services

    mount = _mount(tool)
    if tool.table_id is None:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The tool {tool.name!r} has no table.")
    try:
        version, count = services.table_write(table_id=tool.table_id, change=build(mount, arguments))
    except Table.DoesNotExist as exc:
        raise _table_gone(tool, exc) from exc
    return {verb: count, "version": version}
