"""The MCP protocol handlers (SPEC §4.3-§4.5): tools/list, tools/call and the middleware for every other
method, on the SDK's low-level Server. No business rules live here: a call runs through the one pipeline
(tools_app.execution.pipeline.run_tool_call) and this module only translates its outcome into MCP (SPEC §4.4):
TOOL_NOT_FOUND and an external tool are JSON-RPC -32602 errors, other failures isError results whose text
starts with the code, successes the JSON as text and as structuredContent.

Every handler does its database work in ONE hop (mcp_app.hops), starting with a query that re-checks the
key and the instance (a key revoked or an instance disabled through any worker is refused on the next
request, SPEC §1): for tools/call that is the one statement of tools_app.selectors.binding_call_target.
"""

import asyncio
import difflib
import functools
import json
import logging
import warnings
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server import Server
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_app import features
from mcp_app.hops import DatabaseHops
from mcp_app.requests import (
    RequestState,
    call_target,
    caller_for,
    current_instance,
    decode_cursor,
    encode_cursor,
    grant_of,
    page_size,
    request_state,
)
from tools_app import __version__ as tools_version
from tools_app.choices import REGISTRY_TYPES, ToolType
from tools_app.execution.pipeline import CHANGING_TYPES, CallOutcome, CallTarget, run_tool_call, tool_cache
from tools_app.grants import Grant
from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import UNKNOWN_TOOL_MAX_SUGGESTIONS
from tools_app.models import Binding, Discovery, LogLevel, McpInstance, Tool
from tools_app.registry import PROXY_NAME
from tools_app.registry.export import tool_entry
from tools_app.tool_types import TOOL_TYPES
from tools_app.validators import TOOL_NAME_RE

logger = logging.getLogger(__name__)

#
# tools/list (SPEC §4.3, §4.5)
#


def usable_bindings(instance: McpInstance, grant: Grant) -> Any:
    """The enabled bindings of the instance in the caller's set (tools_app.grants: Grant.may_use, as a query):
    no tool that changes data for a caller, instance or binding that is read-only, no binding whose pinned
    arguments name a value the caller does not have."""
    bindings = Binding.objects.filter(mcp_instance_id=instance.pk, enabled=True)
    changing = list(CHANGING_TYPES)
    if instance.read_only or not grant.writes:
        bindings = bindings.exclude(tool__type__in=changing)
    else:
        bindings = bindings.exclude(read_only=True, tool__type__in=changing)
    pinned = bindings.exclude(pinned_arguments={}).values_list("pk", "pinned_arguments")
    lacking = [pk for pk, pins in pinned if grant.missing_sources(pins)]
    return bindings.exclude(pk__in=lacking) if lacking else bindings


def list_tools_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    """A page of the instance's tools in the caller's set, ordered by name; keyset pagination, so edits never
    repeat a page."""
    instance = current_instance(state)
    return tools_page(instance, grant_of(state.caller), cursor)


def tools_page(instance: McpInstance, grant: Grant, cursor: str | None) -> dict[str, Any]:
    """tools/list's answer for a caller with `grant` on `instance` (already checked): also what the admin's
    "as a client" page shows (toolhub.as_client), so both list the same tools."""
    bindings = (
        usable_bindings(instance, grant)
        .exclude(tool__type=ToolType.EXTERNAL)
        .select_related("tool")
        .order_by("name_key", "id")
    )
    search = instance.discovery == Discovery.SEARCH
    if search:
        # SPEC §4.5: only the registry tools are listed; every bound tool stays callable by name, and
        # through call_tool for clients that only call what they listed.
        bindings = bindings.filter(tool__type__in=REGISTRY_TYPES).exclude(name_key=PROXY_NAME)
    if cursor:
        bindings = bindings.filter(name_key__gt=decode_cursor(cursor))
    size = page_size()
    rows = list(bindings[: size + 1])
    result: dict[str, Any] = {"tools": [tool_entry(binding) for binding in rows[:size]]}
    if search and not cursor:
        result["tools"].insert(0, proxy_entry(*proxy_finders(instance, grant)))
    if len(rows) > size:
        result["nextCursor"] = encode_cursor(rows[size - 1].name_key)
    return result


def _markdown_of(tool_type: str, value: Any) -> str | None:
    """The Markdown a registry result carries for the model (SPEC §5), or None to send the JSON as text."""
    spec = TOOL_TYPES.get(tool_type)
    if not isinstance(value, dict) or spec is None:
        return None
    return spec.markdown_of(value)


def success_result(outcome: CallOutcome) -> dict[str, Any]:
    """SPEC §4.4: the JSON as text (a registry result's Markdown instead, when it has one) and as
    structuredContent, lists and scalars wrapped as {"result": ...}. A page of a list (docs/paging.md) is
    sent as it is, its text opening with which items it shows and how to get the rest."""
    value = outcome.value
    markdown = _markdown_of(outcome.tool_type or "", value)
    structured = value if isinstance(value, dict) else {"result": value}
    text = markdown if markdown is not None else outcome.text
    if outcome.page is not None:
        text = f"{outcome.page.note}\n\n{text}"
    return _text_result(text, structured, is_error=False)


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
    content = None
    if structured:
        content = error.as_dict()
        if (rid := telemetry.error_request_id()) is not None:
            content["request_id"] = rid  # The id a user quotes (the answer's X-Request-ID)
    return _text_result(f"{error.code}: {error.message}", content, is_error=True)


def _error_data() -> dict[str, Any] | None:
    """The `data` of a JSON-RPC error toolhub raises: the request's id, when there is one."""
    rid = telemetry.error_request_id()
    return {"request_id": rid} if rid is not None else None


def _declares_output_schema(target: "CallTarget") -> bool:
    """Whether tools/list gives this tool an outputSchema; True when unknown (no structuredContent suits all)."""
    try:
        return bool(tool_cache.get(target.tool_id, target.tool_changed).output_schema)
    except Tool.DoesNotExist:
        return True


#
# tools/call (SPEC §4.4): resolve here, everything else in the pipeline
#


INVALID_NAME = " Tool names are 1 to 64 characters from A-Z, a-z, 0-9, '_', '.' and '-'."

#
# The call proxy: with discovery `search`, tools/list shows only the registry tools, and many
# clients only call a tool they listed. `call_tool` runs any enabled tool of the instance by name, through
# the same pipeline and recorded as a call of that tool.
#

# The proxy's input schema is closed, so strict function-calling hosts (OpenAI Agents' strict conversion) accept
# it: `arguments` cannot be an open object there, so it is also accepted as JSON text of an object, and null
# (the value a strict host sends for an optional argument) means none.
PROXY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_name": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The tool to run."},
        "arguments": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "The tool's arguments as a JSON object in text, as its input schema says, e.g. "
            '"{\\"query\\": \\"[0]\\"}"; an object is accepted too. Null or omitted: none.',
        },
    },
    "required": ["tool_name"],
    "additionalProperties": False,
}
PROXY_ANNOTATIONS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}


def proxy_finders(instance: McpInstance, grant: Grant) -> tuple[str | None, str | None]:
    """The effective names of the instance's search tool and definition tool in the caller's set, or None."""
    rows = (
        usable_bindings(instance, grant)
        .filter(tool__type__in=[ToolType.SEARCH_TOOLS, ToolType.GET_TOOL_DEFINITION])
        .values_list("name_override", "tool__name", "tool__type")
    )
    names: dict[str, list[str]] = {}
    for override, tool_name, tool_type in rows:
        names.setdefault(tool_type, []).append(override or tool_name)
    search = sorted(names.get(ToolType.SEARCH_TOOLS, []))
    definition = sorted(names.get(ToolType.GET_TOOL_DEFINITION, []))
    return (search[0] if search else None), (definition[0] if definition else None)


def _finding(search: str | None, definition: str | None) -> str:
    """How to find a tool on this instance, naming its own registry tools (or saying there are none)."""
    if search and definition:
        return f"find a tool with {search} ({definition} gives its input schema)"
    if search:
        return f"find a tool with {search}"
    if definition:
        return f"{definition} gives a tool's input schema by its name (no search tool is bound here)"
    return "no search tool is bound here: ask the server's owner for the tools' names"


def proxy_entry(search: str | None, definition: str | None) -> dict[str, Any]:
    """The tools/list entry of call_tool, its description naming the instance's own search and definition
    tools under their effective names."""
    return {
        "name": PROXY_NAME,
        "description": (
            "Run a tool of this server by name. This server lists only its registry tools: "
            f"{_finding(search, definition)}, then run it here with its name and its arguments, e.g. "
            '{"tool_name": "orders_query", "arguments": "{\\"query\\": \\"[0]\\"}"}.'
        ),
        "inputSchema": PROXY_SCHEMA,
        "annotations": PROXY_ANNOTATIONS,
    }


def _proxy_problem(arguments: Any) -> str | None:
    if not isinstance(arguments, dict):
        return 'call_tool takes an object: {"tool_name": string, "arguments": object}.'
    unknown = sorted(set(arguments) - {"tool_name", "arguments"})
    if unknown:
        return f"call_tool takes only 'tool_name' and 'arguments'; unknown: {', '.join(map(repr, unknown[:5]))}."
    tool_name = arguments.get("tool_name")
    if not isinstance(tool_name, str) or not tool_name:
        return "'tool_name' must be a non-empty string: the name of the tool to run."
    if not isinstance(_proxied_arguments(arguments.get("arguments")), dict):
        return "'arguments' must be an object, or JSON text of one: the arguments of the tool named by 'tool_name'."
    return None


def _proxied_arguments(value: Any) -> Any:
    """call_tool's `arguments`: an object, JSON text of one, or null/absent for none (PROXY_SCHEMA)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def proxy_finders_for(state: RequestState, instance_id: int) -> tuple[str | None, str | None]:
    instance = McpInstance.objects.filter(pk=instance_id).first()
    return proxy_finders(instance, grant_of(state.caller)) if instance is not None else (None, None)


def nearest_names(state: RequestState, instance_id: int, name: str) -> list[str]:
    """The enabled, callable tools of the instance in the caller's set whose names are closest to `name` (at
    most 3)."""
    instance = McpInstance.objects.filter(pk=instance_id).first()
    if instance is None:
        return []
    names = list(
        usable_bindings(instance, grant_of(state.caller))
        .exclude(tool__type=ToolType.EXTERNAL)
        .values_list("name_override", "tool__name")
    )
    effective = sorted({override or tool_name for override, tool_name in names})
    folded = {candidate.lower(): candidate for candidate in effective}
    close = difflib.get_close_matches(name.lower(), list(folded), n=UNKNOWN_TOOL_MAX_SUGGESTIONS, cutoff=0.5)
    return [folded[match] for match in close]


def _proxy_call(
    state: RequestState, instance_id: int, arguments: Any, progress: Callable[[str], None] | None
) -> dict[str, Any]:
    problem = _proxy_problem(arguments)
    if problem is not None:
        return error_result(ToolError(ErrorCode.INVALID_ARGUMENTS, f"Invalid arguments: {problem}"))
    tool_name: str = arguments["tool_name"]
    if TOOL_NAME_RE.fullmatch(tool_name) is None:
        target = CallTarget(owner_id=state.caller.owner_id, instance_id=instance_id)
    else:
        target = call_target(state, tool_name)
    caller = caller_for(state, target, tool_name)  # the proxied tool's scope, as if called by its name
    outcome = run_tool_call(
        caller=caller,
        target=target,
        name=tool_name,
        arguments=_proxied_arguments(arguments.get("arguments")),
        progress=progress,
    )
    error = outcome.error
    if error is None:
        return success_result(outcome)
    if outcome.refused and error.code == ErrorCode.TOOL_NOT_FOUND:
        suggestions = nearest_names(state, instance_id, tool_name)
        message = error.message
        if suggestions and "did you mean" not in message:
            message += f" Did you mean: {', '.join(suggestions)}?"
        search, _definition = proxy_finders_for(state, instance_id)
        message += f" {search} finds a tool by what it does." if search else " No search tool is bound here."
        error = ToolError(ErrorCode.TOOL_NOT_FOUND, message, {"tool_name": tool_name, "suggestions": suggestions})
    return error_result(error)  # call_tool declares no outputSchema: the error is structured too


def call_tool_sync(
    state: RequestState, name: str, arguments: dict[str, Any] | None, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Resolve `name` among the instance's bindings and run it through the pipeline; translate the outcome."""
    valid_name = TOOL_NAME_RE.fullmatch(name) is not None
    if valid_name:
        target = call_target(state, name)
        if name == PROXY_NAME and target.discovery == Discovery.SEARCH:
            assert target.instance_id is not None
            return _proxy_call(state, target.instance_id, arguments, progress)
    else:
        # Cannot be a binding's name (SPEC §2.2): never sent to SQL (PostgreSQL refuses a NUL in text).
        instance = current_instance(state)
        target = CallTarget(
            owner_id=instance.owner_id,
            instance_id=instance.pk,
            max_result_bytes=instance.max_result_bytes,
            instance_slug=instance.slug,
        )
    caller = caller_for(state, target, name)
    outcome = run_tool_call(caller=caller, target=target, name=name, arguments=arguments or {}, progress=progress)
    error = outcome.error
    if error is None:
        return success_result(outcome)
    if outcome.refused:
        # SPEC §4.4 and §8: no enabled tool of that name, or an external one, is a -32602 error (for the
        # external tool, saying where it is served), not a tool result.
        raise MCPError(types.INVALID_PARAMS, error.message + ("" if valid_name else INVALID_NAME), _error_data())
    return error_result(error, structured=not _declares_output_schema(target))


#
# The SDK server: handlers and the middleware for every other method
#


def _for_era(ctx: Any, result: dict[str, Any], **modern_fields: Any) -> dict[str, Any]:
    # 2026-07-28 results carry resultType (and cache hints for cacheable ones); earlier eras do not.
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        result.update(resultType="complete", **modern_fields)
    return result


async def _on_list_tools(hops: DatabaseHops, ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
    state = request_state(ctx)
    try:
        result = await hops.run(list_tools_sync, state, params.cursor if params is not None else None)
        # Never cached by clients: an edit through any worker must show on the next list (SPEC §1).
        return _for_era(ctx, result, ttlMs=0, cacheScope="private")
    except MCPError:
        raise
    except Exception:
        logger.exception("tools/list failed on /mcp/%s/", state.caller.slug)
        raise MCPError(
            types.INTERNAL_ERROR, "toolhub could not list the tools; the error was logged.", _error_data()
        ) from None


class _Notifier:
    """Progress and log notifications for one streamed tools/call.

    A call is streamed (mcp_app.transport) when it asks for notifications (a progress token; on 2026-07-28
    a log level in its `_meta`), or when its instance has a log level (McpInstance.log_level) and the client
    is of the handshake era (2025-11-25 and before) and accepts a stream. Nothing is held beyond the request.
    The pipeline reports from the database thread; the reports are queued to the event loop and sent in
    order. Progress goes up 0 (received), 1 (running), 2 (ran, being recorded), 3 (done).

    Log messages (notifications/message, logger "toolhub"): each step at `debug` (calling, running, ran), the
    end at `info` ("<name> done") or, for a call that failed, at `warning`. Which are sent:
    - 2026-07-28: those at or above the level the request's own `_meta` names, and none without one (that
      revision forbids logs a request did not ask for; the instance's level does not apply);
    - 2025-11-25 and before: those at or above the instance's log level, read with the key's re-check in
      the call's own query (a client's logging/setLevel cannot outlive its request on a stateless server);
      with no instance level, every message of a call streamed for its progress token, as before.
    """

    TOTAL = 3

    def __init__(self, ctx: Any, name: str, state: RequestState) -> None:
        self.ctx = ctx
        self.name = name
        self.state = state
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.step = 0
        self.pending: str | None = None
        self.task: asyncio.Task | None = None
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # What ctx.log would send (the SDK's per-request gate), without its deprecation warning per call.
        self.requested = allowed_log_levels(ctx.protocol_version, ctx.meta)

    def levels(self) -> frozenset[str]:
        if self.modern:
            return self.requested
        return levels_from(self.state.caller.log_level) or self.requested

    def from_thread(self, message: str) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, message)

    async def _send(self, message: str, *, step: int | None, level: types.LoggingLevel) -> None:
        try:
            session = self.ctx.session
            if step is not None:
                await session.report_progress(step, self.TOTAL, message)  # a no-op without a progress token
            if level in self.levels():
                params = types.LoggingMessageNotificationParams(
                    level=level, logger="toolhub", data={"tool": self.name, "message": message}
                )
                notification = types.LoggingMessageNotification(params=params)
                await session.send_notification(notification, related_request_id=self.ctx.request_id)
        except Exception:  # a client gone mid-call: the call still finishes and is recorded
            logger.debug("Could not send a notification for %r", self.name, exc_info=True)

    async def _flush(self) -> None:
        # The first log message waits until the call's own query has read the instance's log level (the
        # thread's first report, or the end), so that no message follows a stale hint.
        if self.pending is not None:
            message, self.pending = self.pending, None
            await self._send(message, step=None, level="debug")

    async def _drain(self) -> None:
        while (message := await self.queue.get()) is not None:
            await self._flush()
            self.step = min(self.step + 1, self.TOTAL - 1)
            await self._send(message, step=self.step, level="debug")

    async def start(self) -> None:
        self.pending = f"calling {self.name}"
        try:
            await self.ctx.session.report_progress(0, self.TOTAL, self.pending)
        except Exception:
            logger.debug("Could not send a notification for %r", self.name, exc_info=True)
        self.task = asyncio.create_task(self._drain())

    async def finish(self, result: dict[str, Any] | None) -> None:
        self.queue.put_nowait(None)
        if self.task is not None:
            await self.task
        await self._flush()
        failed = result is None or result.get("isError")
        text = (result or {}).get("content") or [{}]
        summary = f"{self.name} failed: {str(text[0].get('text', ''))[:200]}" if failed else f"{self.name} done"
        await self._send(summary, step=self.TOTAL, level="warning" if failed else "info")


def levels_from(level: str) -> frozenset[str]:
    """The MCP logging levels at or above `level` (none for "": off)."""
    if level not in LOG_LEVELS:
        return frozenset()
    return frozenset(LOG_LEVELS[LOG_LEVELS.index(level) :])


LOG_LEVELS: tuple[str, ...] = tuple(LogLevel.values)


async def _on_call_tool(hops: DatabaseHops, ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    # No exception may escape: the SDK would send its text as a code-0 error (MCP_SDK_NOTES).
    state = request_state(ctx)
    notifier = _Notifier(ctx, params.name[:80], state) if state.streamed else None
    result: dict[str, Any] | None = None
    try:
        if notifier is None:
            result = await hops.run(call_tool_sync, state, params.name, params.arguments)
        else:
            await notifier.start()
            result = await hops.run(call_tool_sync, state, params.name, params.arguments, notifier.from_thread)
    except MCPError:
        raise
    except Exception:
        logger.exception("tools/call %r failed on /mcp/%s/", params.name, state.caller.slug)
        # The tool (and whether it declares an outputSchema) is unknown here: no structuredContent.
        result = error_result(
            ToolError(ErrorCode.INTERNAL_ERROR, "The call failed unexpectedly; the error was logged on the server."),
            structured=False,
        )
    finally:
        if notifier is not None and state.denied is None:
            await notifier.finish(result)
    return _for_era(ctx, result)


def _listing(name: str, sync: Any) -> Any:
    """An async handler for a paginated list (resources, templates, prompts): one hop, never cached."""

    async def handler(hops: DatabaseHops, ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        state = request_state(ctx)
        try:
            result = await hops.run(sync, state, params.cursor if params is not None else None)
        except MCPError:
            raise
        except Exception:
            logger.exception("%s failed on /mcp/%s/", name, state.caller.slug)
            raise MCPError(types.INTERNAL_ERROR, f"toolhub could not answer {name}; the error was logged.") from None
        return _for_era(ctx, result, ttlMs=0, cacheScope="private")

    return handler


def _single(name: str, sync: Any, *fields: str) -> Any:
    """An async handler running `sync(state, *params.<fields>)` in one hop (resources/read, prompts/get, ...)."""

    async def handler(hops: DatabaseHops, ctx: Any, params: Any) -> dict[str, Any]:
        state = request_state(ctx)
        try:
            values = [_plain(getattr(params, field)) for field in fields]
            result = await hops.run(sync, state, *values)
        except MCPError:
            raise
        except Exception:
            logger.exception("%s failed on /mcp/%s/", name, state.caller.slug)
            raise MCPError(types.INTERNAL_ERROR, f"toolhub could not answer {name}; the error was logged.") from None
        # 2026-07-28: resources/read and prompts/get results are cacheable, and never cached;
        # results that take no hints drop them.
        return _for_era(ctx, result, ttlMs=0, cacheScope="private")

    return handler


def _plain(value: Any) -> Any:
    """A params field as plain JSON data (the SDK gives pydantic models for refs and arguments)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=True)
    return str(value) if type(value).__name__ == "AnyUrl" else value


async def _on_set_level(hops: DatabaseHops, ctx: Any, params: types.SetLevelRequestParams) -> dict[str, Any]:
    """2025-11-25 logging/setLevel: accepted (the key and instance re-checked by the middleware). A level
    cannot outlive this request on a stateless server: the owner sets the instance's log level instead
    (McpInstance.log_level), and calls send their logs at that level (_Notifier)."""
    return {}


# Methods whose handler re-checks the key and the instance in its own hop.
SELF_CHECKING = frozenset(
    {
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)


class InstanceMiddleware:
    """For methods other than tools/list and tools/call (initialize, server/discover, ping, unknown ones):
    re-check the key and instance, and put the instance's `instructions` into initialize/discover results."""

    def __init__(self, hops: DatabaseHops) -> None:
        self.hops = hops

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is None or ctx.method in SELF_CHECKING:
            return await call_next(ctx)
        state = request_state(ctx)
        try:
            instance = await self.hops.run(current_instance, state)
        except MCPError:
            raise
        except Exception:
            logger.exception("%s failed on /mcp/%s/", ctx.method, state.caller.slug)
            message = "toolhub could not load this instance; the error was logged."
            raise MCPError(types.INTERNAL_ERROR, message, _error_data()) from None
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
            result = dict(result)
            if instance.instructions:
                result["instructions"] = instance.instructions
            else:
                result.pop("instructions", None)
        return result


class TracingMiddleware:
    """The SDK's OpenTelemetryMiddleware when tracing is on (tools_app.kernel.telemetry); a plain pass-through
    otherwise, so that tracing off costs one check per message."""

    def __init__(self) -> None:
        from mcp.server._otel import OpenTelemetryMiddleware

        self._traced = OpenTelemetryMiddleware()

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if telemetry.tracing_enabled():
            return await self._traced(ctx, call_next)
        return await call_next(ctx)


def _no_header_parameters(name: str) -> None:
    # 2026-07-28: without this, every tools/call first runs the whole tools/list handler to look for
    # x-mcp-header declarations; toolhub schemas declare none.
    return None


def build_server(hops: DatabaseHops) -> Server:
    def bound(handler: Any) -> Any:
        return functools.partial(handler, hops)

    with warnings.catch_warnings():
        # logging/setLevel is deprecated as of 2026-07-28 (SEP-2577) but is how 2025-11-25 clients ask.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = Server(
            "toolhub",
            version=tools_version,
            title="toolhub",
            on_list_tools=bound(_on_list_tools),
            on_call_tool=bound(_on_call_tool),
            on_list_resources=bound(_listing("resources/list", features.list_resources_sync)),
            on_list_resource_templates=bound(
                _listing("resources/templates/list", features.list_resource_templates_sync)
            ),
            on_read_resource=bound(_single("resources/read", features.read_resource_sync, "uri")),
            on_list_prompts=bound(_listing("prompts/list", features.list_prompts_sync)),
            on_get_prompt=bound(_single("prompts/get", features.get_prompt_sync, "name", "arguments")),
            on_completion=bound(_single("completion/complete", features.complete_sync, "ref", "argument")),
            on_set_logging_level=bound(_on_set_level),
            get_tool_input_schema=_no_header_parameters,
        )
    # The SDK's OpenTelemetry middleware runs only while tracing is on (TracingMiddleware): its span of
    # each method continues the `traceparent` in the request's params._meta.
    server.middleware = [TracingMiddleware(), InstanceMiddleware(hops)]
    return server


__all__ = ["build_server", "call_tool_sync", "list_tools_sync"]
