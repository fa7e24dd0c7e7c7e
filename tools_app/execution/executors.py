"""What runs each tool type: ONE table from type to executor (EXECUTORS), and ONE entry point,
`execute(tool=, arguments=)`, that validates the arguments against the tool's input schema and runs the
type's executor. The call pipeline (tools_app.execution.pipeline) is its one caller on every surface.

A type's declaration (schema, kind, annotations, help, examples) is its module in tools_app.tool_types;
what it does when called is its line here. Data types reach their table through read_mount and
write_mount (the services' cached reads and locked writes, then data_access.operations; a read may move
to a heavy worker, tools_app.execution.heavy); registry types through tools_app.registry. Every outcome is
JSON-able data or a ToolError.

A new read type is its declaration module (tools_app.tool_types) and one line here: `reader(operation)`, where
`operation(data, mount, arguments)` answers over the value at the tool's mount (the data tools' own are in
data_access.operations). It then runs on both storages, narrowed by a binding's `where` and moved to a heavy
worker like every read; on a rows table its operation gets the mount's collection gathered, unless the line also
names how it reads the collection where its rows are (`over_collection`, records.CollectionReader).
tools_app/tests/tool_types/test_new_read_type.py registers a stand-in type by those two alone.
"""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError

from tools_app import registry, services
from tools_app.choices import ToolType
from tools_app.data_access import budget, narrowing, operations, pointer
from tools_app.data_access.arguments import validate_arguments
from tools_app.data_access.operations import Mount
from tools_app.execution import heavy, records
from tools_app.execution.call_limits import default_limits
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import MAX_IDEMPOTENCY_KEY, max_table_depth
from tools_app.models import Table, TableStorage, Tool
from tools_app.paging import PageWindow
from tools_app.tool_types import EXTERNAL, TOOL_TYPES, is_pageable, is_read
from tools_app.tool_types.base import WRITE
from tools_app.tool_types.data import SAFE_WRITE_PROPERTIES
from tools_app.tool_types.external import refusal
from tools_app.validators import describe_path, nesting_beyond

__all__ = ["EXECUTORS", "Executor", "execute", "read_mount", "reader", "run_read", "write_at", "write_mount"]

# (*, tool, arguments, scope) -> JSON result; arguments already validated against the tool's schema.
Executor = Callable[..., Any]


def execute(
    *,
    tool: Tool,
    arguments: Any,
    scope: Any = None,
    where: dict[str, Any] | None = None,
    window: PageWindow | None = None,
) -> Any:
    """Validate `arguments` against the tool's schema and run it; return its JSON result.

    `scope` is what registry tools work over (an MCP instance, or a user over the API); data tools
    ignore it. `where` (a binding's narrowing resolved for the caller, tools_app.grants) narrows the records a
    read sees (tools_app.data_access.narrowing); any other tool is TOOL_NOT_CALLABLE with
    it, before anything runs. Raises ToolError with a code (SPEC §8); a failed write leaves data and version as
    they were. Runs under the budget active on the thread (the pipeline enters the call's), else under the
    server's default budget (tools_app.execution.call_limits): QUERY_TOO_EXPENSIVE when it is spent.

    `window` (the pipeline's, for a pageable read): the page the caller wants within its result budget. A rows
    table's collection reader that can read only that page's items answers a paging.Cut instead of the whole list
    (records.whole_collection: the mount's records; records.query_collection: a compiled query's answer of one
    item per record); any other read answers as without, and the pipeline pages the list.
    """
    if budget.active() is None:
        # Run outside the pipeline (a management command, a benchmark): under the server's default budget.
        with budget.enforced(default_limits()):
            return execute(tool=tool, arguments=arguments, scope=scope, where=where, window=window)
    if where is not None and not is_read(tool.type):
        raise ToolError(
            ErrorCode.TOOL_NOT_CALLABLE,
            f"The tool {tool.name!r} cannot run here: its binding narrows the records it reads, and a "
            f"{tool.type} tool does not read records. Nothing was run or written.",
        )
    spec = TOOL_TYPES.get(tool.type)
    if spec is not None and spec.kind == EXTERNAL:
        raise refusal(tool)  # it runs on its own server: refused before its arguments are looked at
    base_schema = spec.input_schema if spec is not None else None
    safe = None
    if spec is not None and spec.kind == WRITE:
        arguments, safe = safe_write_options(tool, arguments)
    arguments = validate_arguments(schema=tool.input_schema, arguments=arguments, base_schema=base_schema)
    executor = EXECUTORS.get(tool.type) if spec is not None else None
    if executor is None:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, f"The tool type {tool.type!r} cannot be run.")
    if safe is not None:
        arguments = {**arguments, SAFE_WRITE: safe}
    options: dict[str, Any] = {}
    if where is not None:
        options["where"] = where
    if window is not None and is_read(tool.type) and is_pageable(tool.type):
        options["window"] = window
    return executor(tool=tool, arguments=arguments, scope=scope, **options)


# Where execute hands a write's SafeWrite to its type's executor (not a JSON name: no argument can collide).
SAFE_WRITE = ("toolhub", "safe-write")


def safe_write_options(tool: Tool, arguments: Any) -> tuple[Any, Any]:
    """A write's arguments without its safe-write options, and those options as a services.SafeWrite:
    taken out before the arguments are checked against the tool's own schema, which need not declare them."""
    if not isinstance(arguments, dict) or not any(name in arguments for name in SAFE_WRITE_PROPERTIES):
        return arguments, services.SafeWrite()
    rest = {name: value for name, value in arguments.items() if name not in SAFE_WRITE_PROPERTIES}
    expected = arguments.get("expected_version")
    if expected is not None and (
        not isinstance(expected, int) or isinstance(expected, bool) or not 1 <= expected < 2**63
    ):
        raise _invalid("expected_version", "must be an integer of at least 1 (the table version you read)")
    dry_run = arguments.get("dry_run")
    dry_run = False if dry_run is None else dry_run  # null: not given (SAFE_WRITE_PROPERTIES)
    if not isinstance(dry_run, bool):
        raise _invalid("dry_run", "must be true or false")
    key = arguments.get("idempotency_key")
    if key is not None and (
        not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isprintable()
    ):
        raise _invalid("idempotency_key", f"must be a string of 1 to {MAX_IDEMPOTENCY_KEY} printable characters")
    # What the key is bound to: the tool and every argument but the key and dry_run.
    bound = {
        name: value
        for name, value in arguments.items()
        if name not in ("idempotency_key", "dry_run") and not (name == "expected_version" and value is None)
    }
    safe = services.SafeWrite(
        expected_version=expected, dry_run=dry_run, idempotency_key=key or "", request={"tool": tool.pk, **bound}
    )
    return rest, safe


def _invalid(name: str, rule: str) -> ToolError:
    return ToolError(ErrorCode.INVALID_ARGUMENTS, f"Invalid arguments: {name} {rule}.", {"path": [name]})


def _mount(tool: Tool) -> tuple[Mount, int]:
    """The tool's mount and its table's id; MOUNT_NOT_FOUND for a data tool without a table."""
    if tool.table_id is None:
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The tool {tool.name!r} has no table.")
    return Mount(tool.json_path, tool.key_field), tool.table_id


def _table_gone(tool: Tool, exc: Exception) -> ToolError:
    return ToolError(ErrorCode.MOUNT_NOT_FOUND, f"The table of the tool {tool.name!r} no longer exists.")


def read_mount(tool: Tool) -> tuple[Mount, int, Any]:
    """A data tool's mount with its table's current version and data (a rows table's document holds its
    collections as empty containers: tools_app.execution.records reads them)."""
    mount, version, _storage, data = _read_state(tool)
    return mount, version, data


def _read_state(tool: Tool, *, load: bool = True) -> tuple[Mount, int, str, Any]:
    """The tool's mount, its table's version and storage, and (a document table's, with `load`) its document."""
    mount, table_id = _mount(tool)
    try:
        version, storage = services.table_head(table_id)
        data = services.table_document(table_id, version) if load and storage != TableStorage.ROWS else None
    except Table.DoesNotExist as exc:
        raise _table_gone(tool, exc) from exc
    records.report_version(version)  # a rows table's read reports the version of its own snapshot after this
    current = budget.active()
    if current is not None:
        current.restart_clocks()  # the time budget is the evaluation's: loading a cold table is not charged
    return mount, version, storage, data


def run_read(
    tool: Tool,
    operation: Callable[..., Any],
    arguments: dict,
    *extra: Any,
    where: dict[str, Any] | None = None,
    window: PageWindow | None = None,
    over_collection: records.CollectionReader | None = None,
) -> Any:
    """A read operation (data_access.operations', or any of that shape) over the tool's mount; moved to a heavy
    worker process if it turns expensive (tools_app.execution.heavy). A rows table is read where its rows are
    (records.read: a collection at the mount by `over_collection`, with `window` the rows of the page only).
    With `where`, over the mount's records within it only (data_access.narrowing)."""
    mount, version, storage, data = _read_state(tool)
    assert tool.table_id is not None  # _read_state refused a tool without a table
    if storage == TableStorage.ROWS:
        try:
            return records.read(
                tool.table_id,
                version,
                mount,
                operation,
                arguments,
                extra,
                where=where,
                window=window,
                over_collection=over_collection,
            )
        except Table.DoesNotExist as exc:  # deleted since its version was read
            raise _table_gone(tool, exc) from exc
    if where is not None:
        extra = (operation, where, *extra)
        operation = narrowing.read_narrowed
    return heavy.read(
        operation, table_id=tool.table_id, version=version, data=data, mount=mount, arguments=arguments, extra=extra
    )


def write_mount(tool: Tool, build: Callable[[Mount, dict], Any], arguments: dict, verb: str) -> dict[str, Any]:
    """Apply the change `build(mount, arguments)` under the table's lock: {verb: count, "version": new}; with
    dry_run, {"dry_run": true, "version": <would be>, "patch": [...]}; a repeated idempotency key, the first
    answer (services.table_write)."""
    mount, table_id = _mount(tool)
    try:
        return write_at(table_id, mount, build, arguments, verb)
    except Table.DoesNotExist as exc:
        raise _table_gone(tool, exc) from exc


def write_at(table_id: int, mount: Mount, build: Callable[[Mount, dict], Any], arguments: dict, verb: str) -> dict:
    """write_mount's write at a mount of a table, for a caller without a tool (the admin's records view): the same
    checks, lock, history entry and answer. Table.DoesNotExist when the table is gone."""
    safe = arguments.get(SAFE_WRITE)  # type: ignore[call-overload]
    arguments = {name: value for name, value in arguments.items() if name != SAFE_WRITE}
    change = build(mount, arguments)

    def limited(data: Any, derived: dict) -> Any:
        # Under the table's lock, so a table cannot move to rows between this check and the write.
        if services.table_head(table_id)[1] == TableStorage.ROWS:
            rows_change = records.write(
                table_id,
                mount,
                build,
                arguments,
                dry_run=bool(safe and safe.dry_run),
                check=lambda seen: _check_depth(mount, arguments, seen),
            )
            return rows_change(data, derived)
        _check_depth(mount, arguments, data)
        return change(data, derived)

    try:
        written = services.table_write(
            table_id=table_id,
            change=limited,
            answer=lambda version, count: {verb: count, "version": version},
            safe=safe,
        )
    except ValidationError as exc:
        # Table.data's encoder: the new document is over TOOLHUB_MAX_TABLE_BYTES. Nothing was written.
        raise ToolError(ErrorCode.VALIDATION_ERROR, f"{exc.messages[0]} Nothing was written.") from exc
    if written.dry_run:
        return {"dry_run": True, "version": written.version, "patch": written.patch}
    return written.result


def _check_depth(mount: Mount, arguments: dict, data: Any) -> None:
    """VALIDATION_ERROR when an element would nest the table deeper than TOOLHUB_MAX_TABLE_DEPTH.

    Only what the call adds is walked, not the whole document (a write to a large table stays cheap): an
    element sits one level below the mount's container, so it may nest (limit - mount depth - 1) levels;
    for an object mount, the element's `content` is what is stored.
    """
    limit = max_table_depth()
    room = limit - len(mount.tokens) - 1
    container = pointer.resolve(data, mount.tokens, mount.json_path) if pointer.exists(data, mount.tokens) else None
    for index, element in enumerate(arguments.get("elements") or []):
        stored = element.get("content") if isinstance(container, dict) and isinstance(element, dict) else element
        path = nesting_beyond(stored, room) if room > 0 else ([] if isinstance(stored, dict | list) else None)
        if path is not None:
            where = describe_path(["elements", index, *(["content"] if stored is not element else []), *path])
            raise ToolError(
                ErrorCode.VALIDATION_ERROR,
                f"A table document nests at most {limit} levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH): "
                f"{where} would go deeper at the mount {mount.label()!r}. Nothing was written.",
                {"path": ["elements", index], "limit": limit},
            )


#
# The executors, one per type
#


def reader(operation: Callable[..., Any], over_collection: records.CollectionReader | None = None) -> Executor:
    """A read type's executor: `operation(data, mount, arguments)` over the tool's mount (run_read); on a rows
    table, a collection at the mount read by `over_collection` (records.CollectionReader), else gathered."""

    def run(
        *,
        tool: Tool,
        arguments: dict[str, Any],
        scope: Any = None,
        where: dict | None = None,
        window: PageWindow | None = None,
    ) -> Any:
        return run_read(tool, operation, arguments, where=where, window=window, over_collection=over_collection)

    return run


def _preview(
    *,
    tool: Tool,
    arguments: dict[str, Any],
    scope: Any = None,
    where: dict | None = None,
    window: PageWindow | None = None,
) -> Any:
    preview_keys = (tool.metadata or {}).get("preview_keys")
    return run_read(
        tool,
        operations.preview,
        arguments,
        preview_keys,
        where=where,
        window=window,
        over_collection=records.preview_collection,
    )


def _data_schema(*, tool: Tool, arguments: dict[str, Any], scope: Any = None, where: dict | None = None) -> Any:
    """The shape only changes with the data: cached per table version and mount. A narrowed shape is computed
    each time (one per caller would grow the table's cache without bound; the pipeline's result cache holds
    it)."""
    mount, version, storage, data = _read_state(tool)
    assert tool.table_id is not None  # _read_state refused a tool without a table
    table_id = tool.table_id
    if storage == TableStorage.ROWS:
        try:
            # The shape is cached under the version of the snapshot its rows are read in.
            with records.snapshot(table_id) as version:
                if where is not None:
                    return records.schema(table_id, version, mount, arguments, where=where)
                return services.table_derived(
                    table_id,
                    version,
                    ("shape", tool.json_path),
                    lambda: records.schema(table_id, version, mount, arguments),
                )
        except Table.DoesNotExist as exc:
            raise _table_gone(tool, exc) from exc
    if where is not None:
        return narrowing.read_narrowed(data, mount, arguments, operations.get_data_schema, where)
    return services.table_derived(
        table_id, version, ("shape", tool.json_path), lambda: operations.get_data_schema(data, mount, arguments)
    )


def writer(operation: Callable[..., Any], verb: str) -> Executor:
    """A write type's executor: the change `operation(mount, arguments)` under the table's lock (write_mount),
    answering {verb: count, "version"}."""

    def run(*, tool: Tool, arguments: dict[str, Any], scope: Any = None) -> Any:
        return write_mount(tool, operation, arguments, verb)

    return run


def _scope(tool: Tool, scope: Any) -> Any:
    """What a registry tool works over (an MCP instance, or a user over the API); refused without one."""
    if scope is None:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, f"The registry tool {tool.name!r} needs a scope to work over.")
    return scope


def _search_tools(*, tool: Tool, arguments: dict[str, Any], scope: Any) -> Any:
    return registry.search_tools(
        scope=_scope(tool, scope),
        query=arguments["query"],
        method=arguments.get("search_method", "bm25"),
        limit=arguments.get("limit", 5),
    )


def _tool_definition(*, tool: Tool, arguments: dict[str, Any], scope: Any) -> Any:
    return registry.tool_definition(scope=_scope(tool, scope), tool_name=arguments["tool_name"])


def _tools_by_category(*, tool: Tool, arguments: dict[str, Any], scope: Any) -> Any:
    return registry.tools_by_category(
        scope=_scope(tool, scope), category=arguments["category"], limit=arguments.get("limit", 20)
    )


def _usage_guide(*, tool: Tool, arguments: dict[str, Any], scope: Any) -> Any:
    return registry.usage_guide(
        scope=_scope(tool, scope), tool_names=arguments.get("tool_names"), category=arguments.get("category")
    )


def _register_tool(*, tool: Tool, arguments: dict[str, Any], scope: Any) -> Any:
    return registry.register_tool(
        scope=_scope(tool, scope),
        name=arguments["name"],
        description=arguments["description"],
        category=arguments.get("category"),
        tags=arguments.get("tags"),
        input_schema=arguments.get("input_schema"),
        mcp_server=arguments.get("mcp_server"),
    )


def _external(*, tool: Tool, arguments: Any, scope: Any = None) -> Any:
    raise refusal(tool)  # served by another MCP server


# Type -> executor: every type of tools_app.tool_types has exactly one line (a test walks both).
EXECUTORS: dict[str, Executor] = {
    ToolType.GET_DATA_SCHEMA: _data_schema,
    ToolType.GET_ALL_DATA: reader(operations.get_all_data, over_collection=records.whole_collection),
    ToolType.QUERY_DATA: reader(operations.query_data, over_collection=records.query_collection),
    ToolType.PREVIEW: _preview,
    ToolType.SELECT: reader(operations.select, over_collection=records.select_collection),
    ToolType.CREATE: writer(operations.create, "created"),
    ToolType.UPDATE: writer(operations.update, "updated"),
    ToolType.DELETE: writer(operations.delete, "deleted"),
    ToolType.SEARCH_TOOLS: _search_tools,
    ToolType.GET_TOOL_DEFINITION: _tool_definition,
    ToolType.LIST_TOOLS_BY_CATEGORY: _tools_by_category,
    ToolType.GET_TOOL_USAGE_GUIDE: _usage_guide,
    ToolType.REGISTER_TOOL: _register_tool,
    ToolType.EXTERNAL: _external,
}
