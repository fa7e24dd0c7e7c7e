"""The MCP endpoint, /mcp/<slug>/ (SPEC §4): an ASGI app in front of the SDK's stateless transport.

Request path (McpEndpoint.__call__):
1. Host/Origin and the bearer key are checked before the SDK sees anything (mcp_app.auth); refusals
   are plain HTTP answers (400/401/403/404/405/413). A body that is not one well-formed JSON-RPC
   message is answered here, -32700 or -32600 (mcp_app.messages), after a fresh key check.
2. The SDK's StreamableHTTPSessionManager (stateless, JSON responses) serves both protocol eras:
   the 2025-11-25 handshake and the session-less 2026-07-28 revision.
3. The handlers below do all of a request's database work in ONE hop to a pool thread (DatabaseHops;
   each pool thread keeps its own connection, so round trips of concurrent requests overlap), starting
   with a query that re-checks the key and the instance (so a key revoked or an instance disabled
   through any worker is refused on the next request, SPEC §1) and loads what the call needs. For
   tools/call that is one fixed SQL statement (CallTarget): building it with the ORM on every call
   cost more CPU than the rest of a cached call. An answer the SDK gives without reaching a handler
   (a refused header, params that fail its validation) goes out only after a fresh key check too.

No business rules live here: tools run through tools_app.data_access.execute(), the only place that
knows what a tool type does; bindings come from the enabled bindings of the instance (SPEC §2.4).
"""

import asyncio
import base64
import binascii
import functools
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone
from mcp import types
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tools_app.choices import READ_ONLY_REGISTRY_TYPES, READ_TYPES, REGISTRY_TYPES, WRITE_TYPES, ToolType
from tools_app.data_access import ToolError, execute
from tools_app.errors import ErrorCode
from tools_app.models import Table, Tool
from tools_app.validators import TOOL_NAME_RE

from .auth import (
    Caller,
    Denied,
    auth_cache,
    authenticate,
    check_host_and_origin,
    key_hash_from_header,
    key_touches,
    not_found,
)
from .messages import REQUEST, Problem, classify
from .models import ApiKey, Binding, CallStatus, Discovery, McpInstance
from .recording import CallRecord, recorder
from .registry_scope import InstanceScope

logger = logging.getLogger(__name__)

SLUG_PATH = re.compile(r"^/mcp/(?P<slug>[-a-zA-Z0-9_]+)/?$")
STATE_KEY = "toolhub.mcp"
MAX_BODY_BYTES = 4 * 1024 * 1024
DENIED_CODE = -32001  # the JSON-RPC error a denied request raises inside the SDK; never sent (see _guard_send)


def _page_size() -> int:
    return int(getattr(settings, "TOOLHUB_MCP_PAGE_SIZE", 100))


#
# Per-request state, carried in the ASGI scope (reaches the handlers as ctx.request.scope on both eras)
#


@dataclass(slots=True)
class RequestState:
    """`verified`: the key and the instance were read from the database during this request (by the
    endpoint, or by a handler's re-check). An answer sent without it is checked first (_guard_send)."""

    caller: Caller
    key_hash: str | None
    denied: Denied | None = None
    verified: bool = False


def _state(ctx: Any) -> RequestState:
    request = getattr(ctx, "request", None)
    state = request.scope.get(STATE_KEY) if request is not None else None
    if state is None:
        raise MCPError(types.INTERNAL_ERROR, "This server only answers through toolhub's MCP endpoint.")
    return state


class _RequestDenied(MCPError):
    """Raised inside the SDK when the re-check fails; the HTTP answer is replaced by the denial."""


#
# Database work: each function below runs in one thread hop
#


CONNECTION_CHECK_INTERVAL = 1.0  # seconds


def _reset_connections() -> None:
    """What Django does around a request (close_old_connections), for requests Django's handler never sees.

    Done before a hop when the connection saw an error, or at most once a second otherwise: with
    CONN_HEALTH_CHECKS each check costs a `SELECT 1` round trip, as much as the request's own query.
    A connection inside an atomic block belongs to an outer caller (a test's transaction): left alone.
    """
    now = time.monotonic()
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            continue
        checked = getattr(conn, "_toolhub_checked_at", None)
        if conn.errors_occurred or checked is None or now - checked > CONNECTION_CHECK_INTERVAL:
            conn.close_if_unusable_or_obsolete()
            conn._toolhub_checked_at = now


def _hop(fn: Any, *args: Any) -> Any:
    _reset_connections()
    return fn(*args)


def _db_threads() -> int:
    return int(getattr(settings, "TOOLHUB_MCP_DB_THREADS", 4))


class DatabaseHops:
    """Where the handlers' database work runs: never on the event loop.

    With `threads` > 0 (production): a pool of that many threads, each keeping its own connection
    (CONN_MAX_AGE), so the round trips of concurrent requests overlap instead of queueing behind one
    thread. Every hop runs in autocommit and reads the committed state, as any worker would (SPEC §1).
    With 0: Django's one shared thread (sync_to_async, thread_sensitive); in-process tests use it so
    that the handlers see the test's open transaction.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._started = 0
        self._lock = threading.Lock()
        self._shared_thread = sync_to_async(_hop, thread_sensitive=True)

    def start(self) -> None:
        if self.threads > 0 and self._pool is None:
            self._started = 0
            self._pool = ThreadPoolExecutor(
                max_workers=self.threads, thread_name_prefix="toolhub-mcp-db", initializer=self._count_thread
            )

    def _count_thread(self) -> None:
        with self._lock:
            self._started += 1

    def stop(self) -> None:
        """Close each pool thread's connections, then end the threads (blocking: call it from a thread).

        A connection belongs to the thread that opened it, so each thread closes its own: one task per
        started thread, held at a barrier so that no thread takes two.
        """
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with self._lock:
            started = self._started
        if started:
            barrier = threading.Barrier(started)

            def close_own_connections() -> None:
                connections.close_all()
                try:
                    barrier.wait(timeout=10)
                except threading.BrokenBarrierError:
                    pass

            for _ in range(started):
                pool.submit(close_own_connections)
        pool.shutdown(wait=True)

    async def run(self, fn: Any, *args: Any) -> Any:
        pool = self._pool
        if pool is None:
            return await self._shared_thread(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(_hop, fn, *args))


def _touch_key(caller: Caller) -> None:
    if key_touches.due(caller.api_key_id):
        recorder.touch_key(caller.api_key_id)


def _deny(state: RequestState, denied: Denied) -> _RequestDenied:
    state.denied = denied
    return _RequestDenied(DENIED_CODE, denied.message)


def _current_instance(state: RequestState) -> McpInstance:
    """The caller's instance, fresh from the database, if the key and the instance are still valid."""
    for _attempt in range(2):
        caller = state.caller
        instance = (
            McpInstance.objects.select_related("owner")
            .filter(
                pk=caller.instance_id,
                slug=caller.slug,
                enabled=True,
                api_keys__pk=caller.api_key_id,
                api_keys__revoked_at__isnull=True,
            )
            .first()
        )
        if instance is not None:
            _touch_key(caller)
            state.verified = True
            return instance
        auth_cache.discard(caller)
        try:
            state.caller = authenticate(caller.slug, state.key_hash)
        except Denied as denied:
            raise _deny(state, denied) from None
    raise _deny(state, not_found(state.caller.slug))


#
# tools/list (SPEC §4.3, §4.5)
#


def _annotations(tool_type: str) -> dict[str, bool]:
    if tool_type in READ_TYPES or tool_type in READ_ONLY_REGISTRY_TYPES:
        return {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    if tool_type in (ToolType.UPDATE, ToolType.DELETE):
        return {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
    # create and register_tool only add; calling them twice adds twice (or fails on the existing key).
    return {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}


def output_schema_for(schema: dict[str, Any]) -> dict[str, Any]:
    """The outputSchema clients validate structuredContent against: non-object results are wrapped (SPEC §4.4)."""
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def tool_entry(binding: Binding) -> dict[str, Any]:
    """One tools/list entry: effective name and description, schemas, annotations."""
    tool = binding.tool
    entry: dict[str, Any] = {
        "name": binding.effective_name,
        "description": binding.effective_description,
        "inputSchema": tool.input_schema,
        "annotations": _annotations(tool.type),
    }
    if tool.alias:
        entry["title"] = tool.alias
    if tool.output_schema:
        entry["outputSchema"] = output_schema_for(tool.output_schema)
    return entry


def _encode_cursor(name_key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": name_key}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        after = None
    if not isinstance(after, str):
        raise MCPError(types.INVALID_PARAMS, "Invalid cursor: pass the nextCursor of a previous tools/list result.")
    return after


def list_tools_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    """A page of the instance's tools, ordered by name; keyset pagination, so edits never repeat a page."""
    instance = _current_instance(state)
    bindings = (
        Binding.objects.filter(mcp_instance_id=instance.pk, enabled=True)
        .exclude(tool__type=ToolType.EXTERNAL)
        .select_related("tool")
        .order_by("name_key", "id")
    )
    if instance.discovery == Discovery.SEARCH:
        # SPEC §4.5: only the registry tools are listed; every bound tool stays callable by name.
        bindings = bindings.filter(tool__type__in=REGISTRY_TYPES)
    if cursor:
        bindings = bindings.filter(name_key__gt=_decode_cursor(cursor))
    size = _page_size()
    rows = list(bindings[: size + 1])
    result: dict[str, Any] = {"tools": [tool_entry(binding) for binding in rows[:size]]}
    if len(rows) > size:
        result["nextCursor"] = _encode_cursor(rows[size - 1].name_key)
    return result


#
# tools/call (SPEC §4.4)
#


@dataclass(frozen=True, slots=True)
class Rendered:
    """A successful result as sent: the text content, structuredContent, and the result's JSON size in bytes."""

    text: str
    structured: dict[str, Any]
    size: int


def _markdown_of(tool_type: str, value: Any) -> str | None:
    """The Markdown a registry result carries for the model (SPEC §5), or None to send the JSON as text."""
    if not isinstance(value, dict) or tool_type not in REGISTRY_TYPES:
        return None
    if tool_type == ToolType.GET_TOOL_USAGE_GUIDE:
        content = value.get("content")
        if not isinstance(content, str):
            return None
        warnings = [str(warning) for warning in value.get("warnings") or ()]
        if warnings:
            # Unknown names are warnings, not errors (SPEC §5): the model reads only the text.
            content = content.rstrip("\n") + "\n\n## Warnings\n\n" + "".join(f"- {w}\n" for w in warnings)
        return content
    markdown = value.get("markdown")
    return markdown if isinstance(markdown, str) else None


def render(value: Any, tool_type: str = "") -> Rendered:
    """JSON as text and as structuredContent (SPEC §4.4); registry results with Markdown send it as the text."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode())
    markdown = _markdown_of(tool_type, value)
    structured = value if isinstance(value, dict) else {"result": value}
    return Rendered(markdown if markdown is not None else text, structured, size)


class ResultCache:
    """Rendered results of read tools per (tool, its last edit, table, table version, arguments).

    A table version is immutable data, so a hit is exactly what running the tool again would return;
    the version comes from the same query that re-checks the caller, so a write through any worker
    is seen by the next call (SPEC §1). Bounded by total bytes.
    """

    def __init__(self, max_bytes: int = 32 * 1024 * 1024, max_entry_bytes: int = 1024 * 1024):
        self._entries: OrderedDict[tuple, Rendered] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes

    def get(self, key: tuple) -> Rendered | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple, entry: Rendered) -> None:
        if entry.size > self.max_entry_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous.size
            self._entries[key] = entry
            self._bytes += entry.size
            while self._bytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


result_cache = ResultCache()


class ToolCache:
    """Tool rows by (id, updated_at), for calls the result cache cannot answer.

    Every edit of a tool goes through Tool.save() (tools_app.services), which moves updated_at, and
    updated_at comes from the query that re-checks the caller: an edit through any worker is a miss on
    the next call (SPEC §1). Cached tools are only read, never changed.
    """

    def __init__(self, capacity: int = 1024):
        self._entries: OrderedDict[tuple, Tool] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity

    def get(self, tool_id: int, changed: Any) -> Tool:
        key = (tool_id, changed)
        with self._lock:
            tool = self._entries.get(key)
            if tool is not None:
                self._entries.move_to_end(key)
                return tool
        tool = Tool.objects.get(pk=tool_id)
        with self._lock:
            self._entries[key] = tool
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return tool

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


tool_cache = ToolCache()


def _text_result(text: str, structured: dict[str, Any] | None, *, is_error: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def error_result(error: ToolError, *, structured: bool = True) -> dict[str, Any]:
    """SPEC §4.4, §8: an isError result whose text starts with the code.

    With `structured`, the error is also sent as structuredContent ({"error", "message", "details"}).
    Not for a tool that declares an outputSchema: clients that validate structuredContent against it
    (the MCP Inspector does, isError or not) would report a schema mismatch instead of the error.
    """
    return _text_result(f"{error.code}: {error.message}", error.as_dict() if structured else None, is_error=True)


def _declares_output_schema(target: "CallTarget") -> bool:
    """Whether tools/list gives this tool an outputSchema; True when unknown (no structuredContent suits all)."""
    try:
        return bool(tool_cache.get(target.tool_id, target.tool_changed).output_schema)
    except Tool.DoesNotExist:
        return True


NARROWING_HINTS = {
    ToolType.QUERY_DATA: "filter or project in the JMESPath expression, e.g. `[?status=='paid'].id` or `[0:20]`",
    ToolType.GET_ALL_DATA: "use a query_data, preview or select tool of this table instead",
    ToolType.PREVIEW: "pass a smaller `limit` (and page with `offset`)",
    ToolType.SELECT: "ask for fewer `keys` per call",
    ToolType.GET_DATA_SCHEMA: "use a tool mounted on a smaller part of the document",
    ToolType.SEARCH_TOOLS: "pass a smaller `limit` (the default is 5)",
    ToolType.LIST_TOOLS_BY_CATEGORY: "pass a smaller `limit` (the default is 20), or a category with fewer tools",
    ToolType.GET_TOOL_USAGE_GUIDE: "name only the tools you need in `tool_names`, or pass one `category`",
    ToolType.GET_TOOL_DEFINITION: (
        "one tool's definition cannot be split; use the summary that search_tools or list_tools_by_category"
        " give, or ask the instance's owner to raise max_result_bytes"
    ),
}
# Tools that change data. SPEC §4.4 refuses a result over max_result_bytes "with a message saying how to
# narrow the call": that is for reads. A change is made (and not undone) before its result is measured,
# and the result has nothing to narrow: a count and the version (SPEC §8), or for register_tool what the
# caller itself sent. Refusing it would answer an applied write with an isError, which says the call
# failed and wrote nothing (SPEC §3), and invite a repeat that writes twice. So these results are sent.
CHANGING_TYPES = WRITE_TYPES | {ToolType.REGISTER_TOOL}


def over_limit(tool_type: str, size: int, limit: int) -> bool:
    """Whether a result of `size` bytes is refused (RESULT_TOO_LARGE); never for CHANGING_TYPES."""
    return size > limit and tool_type not in CHANGING_TYPES


def too_large(tool_type: str, size: int, limit: int) -> ToolError:
    """SPEC §4.4: RESULT_TOO_LARGE, saying how to narrow a call of this (reading) tool type."""
    message = (
        f"The result is {size} bytes, over this instance's limit of {limit} bytes."
        f" Narrow the call: {NARROWING_HINTS.get(tool_type, 'ask for less in one call')}."
    )
    return ToolError(ErrorCode.RESULT_TOO_LARGE, message, {"size": size, "max_result_bytes": limit})


def _unknown_tool(name: str, suggestion: str | None = None, *, invalid: bool = False) -> MCPError:
    shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "…"
    message = f"Unknown tool {shown}: it is not enabled on this instance."
    if suggestion:
        message += f" Tool names are case-sensitive; did you mean {suggestion!r}?"
    if invalid:
        message += " Tool names are 1 to 64 characters from A-Z, a-z, 0-9, '_', '.' and '-'."
    return MCPError(types.INVALID_PARAMS, message)


def _loggable_name(name: str) -> str:
    """A name that fails TOOL_NAME_RE, as the call log keeps it: unprintable characters escaped, 64 at most."""
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)
    return escaped[:64]


@dataclass(frozen=True, slots=True)
class CallTarget:
    """The row a tools/call is resolved from; the binding's columns are None when no binding has the name.

    `tool_changed` is the tool's updated_at as the database driver returns it: only ever compared with
    values from the same query (a cache key), so it is not converted.
    """

    instance_id: int
    owner_id: int
    max_result_bytes: int
    binding_id: int | None
    enabled: bool | None
    name_override: str | None
    tool_id: int | None
    tool_name: str | None
    tool_type: str | None
    tool_changed: Any
    table_id: int | None
    table_version: int | None

    @property
    def found(self) -> bool:
        return self.binding_id is not None

    @property
    def effective_name(self) -> str:
        return self.name_override or self.tool_name or ""


@functools.cache
def _call_target_sql(vendor: str) -> str:
    """The one statement of a tools/call: re-checks key and instance, finds the binding by name, reads the
    table version. Built once from the models' table and column names (quoted for `vendor`)."""
    quote = connection.ops.quote_name

    def table(model: Any) -> str:
        return quote(model._meta.db_table)

    def col(alias: str, model: Any, field: str) -> str:
        return f"{alias}.{quote(model._meta.get_field(field).column)}"

    i, k, b, t, v = McpInstance, ApiKey, Binding, Tool, Table
    columns = [
        col("i", i, "id"),
        col("i", i, "owner"),
        col("i", i, "max_result_bytes"),
        col("b", b, "id"),
        col("b", b, "enabled"),
        col("b", b, "name_override"),
        col("t", t, "id"),
        col("t", t, "name"),
        col("t", t, "type"),
        col("t", t, "updated_at"),
        col("t", t, "table"),
        col("v", v, "version"),
    ]
    return (
        f"SELECT {', '.join(columns)} FROM {table(i)} i"
        f" INNER JOIN {table(k)} k ON {col('k', k, 'mcp_instance')} = {col('i', i, 'id')}"
        f" LEFT JOIN {table(b)} b ON {col('b', b, 'mcp_instance')} = {col('i', i, 'id')}"
        f" AND {col('b', b, 'name_key')} = %s"
        f" LEFT JOIN {table(t)} t ON {col('t', t, 'id')} = {col('b', b, 'tool')}"
        f" LEFT JOIN {table(v)} v ON {col('v', v, 'id')} = {col('t', t, 'table')}"
        f" WHERE {col('i', i, 'id')} = %s AND {col('i', i, 'slug')} = %s AND {col('i', i, 'enabled')}"
        f" AND {col('k', k, 'id')} = %s AND {col('k', k, 'revoked_at')} IS NULL"
    )


def _call_target(state: RequestState, name: str) -> CallTarget:
    """The binding named `name` (any state; SPEC §2.4 names compare case-insensitively), with the re-check
    of key and instance in the same round trip. Raises the denial when the key or the instance is gone."""
    for _attempt in range(2):
        caller = state.caller
        with connection.cursor() as cursor:
            cursor.execute(
                _call_target_sql(connection.vendor), [name.lower(), caller.instance_id, caller.slug, caller.api_key_id]
            )
            row = cursor.fetchone()
        if row is not None:
            _touch_key(caller)
            state.verified = True
            return CallTarget(*row)
        _current_instance(state)  # re-authenticates a stale cached caller, or raises the denial
    raise _deny(state, not_found(state.caller.slug))


def _record_unknown(
    *, instance_id: int, owner_id: int, name: str, state: RequestState, why: str, started: float, at: Any
) -> None:
    """The call-log row of a call whose name found no enabled binding (nothing ran, no use count)."""
    recorder.record(
        CallRecord(
            instance_id=instance_id,
            owner_id=owner_id,
            tool_id=None,
            tool_name=name,
            api_key_id=state.caller.api_key_id,
            status=CallStatus.ERROR,
            duration_ms=(time.perf_counter() - started) * 1000,
            error_code=ErrorCode.TOOL_NOT_FOUND,
            error_message=why,
            bump_use=False,
            at=at,
        )
    )


def call_tool_sync(state: RequestState, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Resolve `name` among the enabled bindings (exact, case-sensitive name), run it, record it."""
    started = time.perf_counter()
    called_at = timezone.now()
    if not TOOL_NAME_RE.fullmatch(name):
        # Cannot be a binding's name (SPEC §2.2): never sent to SQL (PostgreSQL refuses a NUL in text).
        instance = _current_instance(state)
        _record_unknown(
            instance_id=instance.pk,
            owner_id=instance.owner_id,
            name=_loggable_name(name),
            state=state,
            why="Not a valid tool name.",
            started=started,
            at=called_at,
        )
        raise _unknown_tool(name, invalid=True)
    target = _call_target(state, name)
    caller = state.caller
    if not target.found or not target.enabled or target.effective_name != name:
        _record_unknown(
            instance_id=target.instance_id,
            owner_id=target.owner_id,
            name=name,
            state=state,
            why="Not enabled on this instance.",
            started=started,
            at=called_at,
        )
        suggestion = target.effective_name if target.found and target.enabled else None
        raise _unknown_tool(name, suggestion)

    is_external = target.tool_type == ToolType.EXTERNAL
    outcome, error = _run(target, arguments or {})
    if outcome is not None and over_limit(target.tool_type, outcome.size, target.max_result_bytes):
        error, outcome = too_large(target.tool_type, outcome.size, target.max_result_bytes), None
    recorder.record(
        CallRecord(
            instance_id=target.instance_id,
            owner_id=target.owner_id,
            tool_id=target.tool_id,
            tool_name=name,
            api_key_id=caller.api_key_id,
            status=CallStatus.OK if error is None else CallStatus.ERROR,
            duration_ms=(time.perf_counter() - started) * 1000,
            error_code=str(error.code) if error is not None else "",
            error_message=error.message if error is not None else "",
            bump_use=not is_external,
            at=called_at,
        )
    )
    if is_external:
        tool = tool_cache.get(target.tool_id, target.tool_changed)
        where = (tool.metadata or {}).get("mcp_server") or "another MCP server"
        raise MCPError(
            types.INVALID_PARAMS,
            f"The tool {name!r} is an external tool served by {where}; call it there, not on this instance.",
        )
    if error is not None:
        return error_result(error, structured=not _declares_output_schema(target))
    return _text_result(outcome.text, outcome.structured, is_error=False)


def _run(target: CallTarget, arguments: dict[str, Any]) -> tuple[Rendered | None, Any]:
    """(rendered result, None) or (None, ToolError); never raises."""
    if target.tool_type == ToolType.EXTERNAL:
        return None, ToolError(ErrorCode.TOOL_NOT_CALLABLE, "External tools are served elsewhere.")
    cache_key = None
    if target.tool_type in READ_TYPES and target.table_id is not None and target.table_version is not None:
        arguments_key = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
        if len(arguments_key) <= 4096:
            cache_key = (target.tool_id, target.tool_changed, target.table_id, target.table_version, arguments_key)
            cached = result_cache.get(cache_key)
            if cached is not None:
                return cached, None
    try:
        tool = tool_cache.get(target.tool_id, target.tool_changed)
        scope = None
        if tool.type in REGISTRY_TYPES:
            scope = InstanceScope(McpInstance.objects.select_related("owner").get(pk=target.instance_id))
        rendered = render(execute(tool=tool, arguments=arguments, scope=scope), tool.type)
    except ToolError as exc:
        return None, exc
    except Exception:
        logger.exception("Tool %s (id %s) failed on instance %s", target.tool_name, target.tool_id, target.instance_id)
        return None, ToolError(
            ErrorCode.TOOL_NOT_CALLABLE, "The tool failed unexpectedly; the error was logged on the server."
        )
    if cache_key is not None:
        result_cache.put(cache_key, rendered)
    return rendered, None


#
# The SDK server: handlers and the middleware for every other method
#


def _for_era(ctx: Any, result: dict[str, Any], **modern_fields: Any) -> dict[str, Any]:
    # 2026-07-28 results carry resultType (and cache hints for cacheable ones); earlier eras do not.
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        result.update(resultType="complete", **modern_fields)
    return result


async def _on_list_tools(hops: DatabaseHops, ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
    state = _state(ctx)
    try:
        result = await hops.run(list_tools_sync, state, params.cursor if params is not None else None)
        # Never cached by clients: an edit through any worker must show on the next list (SPEC §1).
        return _for_era(ctx, result, ttlMs=0, cacheScope="private")
    except MCPError:
        raise
    except Exception:
        logger.exception("tools/list failed on /mcp/%s/", state.caller.slug)
        raise MCPError(types.INTERNAL_ERROR, "toolhub could not list the tools; the error was logged.") from None


async def _on_call_tool(hops: DatabaseHops, ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    # No exception may escape: the SDK would send its text as a code-0 error (MCP_SDK_NOTES).
    state = _state(ctx)
    try:
        result = await hops.run(call_tool_sync, state, params.name, params.arguments)
    except MCPError:
        raise
    except Exception:
        logger.exception("tools/call %r failed on /mcp/%s/", params.name, state.caller.slug)
        # The tool (and whether it declares an outputSchema) is unknown here: no structuredContent.
        result = error_result(
            ToolError(ErrorCode.TOOL_NOT_CALLABLE, "The call failed unexpectedly; the error was logged on the server."),
            structured=False,
        )
    return _for_era(ctx, result)


class InstanceMiddleware:
    """For methods other than tools/list and tools/call (initialize, server/discover, ping, unknown ones):
    re-check the key and instance, and put the instance's `instructions` into initialize/discover results."""

    def __init__(self, hops: DatabaseHops) -> None:
        self.hops = hops

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is None or ctx.method in ("tools/list", "tools/call"):
            return await call_next(ctx)
        state = _state(ctx)
        try:
            instance = await self.hops.run(_current_instance, state)
        except MCPError:
            raise
        except Exception:
            logger.exception("%s failed on /mcp/%s/", ctx.method, state.caller.slug)
            message = "toolhub could not load this instance; the error was logged."
            raise MCPError(types.INTERNAL_ERROR, message) from None
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
            result = dict(result)
            if instance.instructions:
                result["instructions"] = instance.instructions
            else:
                result.pop("instructions", None)
        return result


def _no_header_parameters(name: str) -> None:
    # 2026-07-28: without this, every tools/call first runs the whole tools/list handler to look for
    # x-mcp-header declarations; toolhub schemas declare none.
    return None


def build_server(hops: DatabaseHops) -> Server:
    from django import get_version

    server = Server(
        "toolhub",
        version=f"django-{get_version()}",
        title="toolhub",
        on_list_tools=functools.partial(_on_list_tools, hops),
        on_call_tool=functools.partial(_on_call_tool, hops),
        get_tool_input_schema=_no_header_parameters,
    )
    # Replaces the SDK's default OpenTelemetry middleware: toolhub configures no exporter, and the
    # call log is its trace of calls.
    server.middleware = [InstanceMiddleware(hops)]
    return server


#
# ASGI
#


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


async def send_denied(send: Any, denied: Denied) -> None:
    body = json.dumps({"error": _ERROR_NAMES.get(denied.status, "ERROR"), "message": denied.message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in denied.headers.items()]
    await send({"type": "http.response.start", "status": denied.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_ERROR_NAMES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    503: "UNAVAILABLE",
}


async def _read_body(receive: Any) -> bytes | None:
    """The whole request body, or None when it is larger than MAX_BODY_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def send_problem(send: Any, problem: Problem) -> None:
    """A malformed JSON-RPC message: the JSON-RPC error, with HTTP 400 as the SDK sends its own parse errors."""
    body = problem.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpEndpoint:
    """The ASGI app for /mcp/<slug>/; `running()` must be entered once (the ASGI lifespan does it).

    `db_threads`: size of the database thread pool (DatabaseHops); default TOOLHUB_MCP_DB_THREADS (4).
    """

    def __init__(self, *, db_threads: int | None = None) -> None:
        self.hops = DatabaseHops(_db_threads() if db_threads is None else db_threads)
        self.server = build_server(self.hops)
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self):
        manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, json_response=True, max_request_body_size=MAX_BODY_BYTES
        )
        self.hops.start()
        try:
            async with manager.run():
                self._manager = manager
                try:
                    yield self
                finally:
                    self._manager = None
        finally:
            # Closing the pool's connections is blocking database work: off the event loop.
            await asyncio.get_running_loop().run_in_executor(None, self.hops.stop)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        match = SLUG_PATH.match(scope["path"])
        if match is None:
            await send_denied(send, Denied(404, "MCP endpoints are /mcp/<slug>/."))
            return
        slug = match["slug"]
        try:
            check_host_and_origin(_header(scope, b"host"), _header(scope, b"origin"))
        except Denied as denied:
            await send_denied(send, denied)
            return
        body = b""
        if scope["method"] == "POST":
            read = await _read_body(receive)
            if read is None:
                await send_denied(send, Denied(413, f"Request bodies are limited to {MAX_BODY_BYTES} bytes."))
                return
            body = read
        key_hash = key_hash_from_header(_header(scope, b"authorization"))
        message = classify(body) if scope["method"] == "POST" else None
        # A cached caller is only trusted for a well-formed request, which reaches a handler or the
        # middleware that re-checks it; anything else is checked against the database now (SPEC §4.2).
        caller = auth_cache.get(slug, key_hash) if message == REQUEST else None
        verified = caller is None
        if caller is None:
            try:
                caller = await self.hops.run(authenticate, slug, key_hash)
            except Denied as denied:
                await send_denied(send, denied)
                return
        if isinstance(message, Problem):
            await send_problem(send, message)
            return
        if scope["method"] != "POST":
            # Stateless: no server-to-client stream to open with GET, no session to DELETE.
            await send_denied(
                send, Denied(405, "This MCP endpoint is stateless: send JSON-RPC with POST.", {"Allow": "POST"})
            )
            return
        if self._manager is None:
            await send_denied(send, Denied(503, "The MCP endpoint is not running (start the ASGI lifespan)."))
            return
        state = RequestState(caller=caller, key_hash=key_hash, verified=verified)
        scope = {**scope, STATE_KEY: state}
        await self._manager.handle_request(scope, _replay(body, receive), self._guard_send(send, state))

    def _guard_send(self, send: Any, state: RequestState) -> Any:
        """The SDK's `send`, guarded: its answer only goes out to a caller checked during this request.

        When a handler's re-check refused the caller, the denial replaces the answer. When the caller
        came from auth_cache and no handler re-checked it (the SDK answered by itself: a refused header
        or protocol version, params that fail its validation), the key and the instance are checked
        now, before anything is sent. A good request was re-checked by its handler: no extra query.
        """
        replaced = False

        async def guarded(message: dict) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start":
                if state.denied is None and not state.verified:
                    await self._verify(state)
                if state.denied is not None:
                    replaced = True
                    await send_denied(send, state.denied)
                    return
            if not replaced:
                await send(message)

        return guarded

    async def _verify(self, state: RequestState) -> None:
        try:
            state.caller = await self.hops.run(authenticate, state.caller.slug, state.key_hash)
            state.verified = True
        except Denied as denied:
            state.denied = denied
        except Exception:
            logger.exception("Could not re-check the key for /mcp/%s/", state.caller.slug)
            state.denied = Denied(503, "toolhub could not check the API key; the error was logged. Try again.")


__all__ = [
    "DatabaseHops",
    "McpEndpoint",
    "RequestState",
    "build_server",
    "call_tool_sync",
    "list_tools_sync",
    "output_schema_for",
    "result_cache",
    "tool_cache",
    "tool_entry",
]
