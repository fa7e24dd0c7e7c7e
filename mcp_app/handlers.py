"""The MCP protocol handlers (SPEC §4.3-§4.5): tools/list, tools/call and the middleware for every other
method, on the SDK's low-level Server. No business rules live here: a call runs through the one pipeline
(tools_app.calls.run_tool_call) and this module only translates its outcome into MCP (SPEC §4.4):
TOOL_NOT_FOUND and an external tool are JSON-RPC -32602 errors, other failures isError results whose text
starts with the code, successes the JSON as text and as structuredContent.

Every handler does its database work in ONE hop (mcp_app.hops), starting with a query that re-checks the
key and the instance (a key revoked or an instance disabled through any worker is refused on the next
request, SPEC §1): for tools/call that is the one statement of tools_app.selectors.binding_call_target.
"""

import base64
import binascii
import dataclasses
import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from mcp import types
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tools_app import telemetry
from tools_app.calls import Caller, CallOutcome, CallTarget, run_tool_call, tool_cache, touch_key
from tools_app.choices import REGISTRY_TYPES, ToolType
from tools_app.errors import ErrorCode, ToolError
from tools_app.models import Binding, Discovery, McpInstance, Surface, Tool
from tools_app.oauth import scope_allows
from tools_app.registry.export import tool_entry
from tools_app.selectors import binding_call_target
from tools_app.tool_types import TOOL_TYPES
from tools_app.validators import TOOL_NAME_RE

from .auth import Caller as KeyHolder
from .auth import Denied, auth_cache, authenticate, insufficient_scope, not_found, oauth_token_live
from .hops import DatabaseHops

logger = logging.getLogger(__name__)

STATE_KEY = "toolhub.mcp"
DENIED_CODE = -32001  # the JSON-RPC error a denied request raises inside the SDK; never sent (transport)


def _page_size() -> int:
    return int(getattr(settings, "TOOLHUB_MCP_PAGE_SIZE", 100))


#
# Per-request state, carried in the ASGI scope (reaches the handlers as ctx.request.scope on both eras)
#


@dataclass(slots=True)
class RequestState:
    """`verified`: the key and the instance were read from the database during this request (by the
    endpoint, or by a handler's re-check). An answer sent without it is checked first (_guard_send)."""

    caller: KeyHolder  # the instance and the key that opened the request (mcp_app.auth)
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


def _deny(state: RequestState, denied: Denied) -> _RequestDenied:
    state.denied = denied
    return _RequestDenied(DENIED_CODE, denied.message)


def _follow_rate(state: RequestState, key_rate_limit: str) -> None:
    """The endpoint counted this request with the rate its auth hint held (mcp_app.rate_limit); when the
    instance's rate changed since, the hint follows, so this worker's next request counts in the new rate."""
    caller = state.caller
    if caller.key_rate_limit != key_rate_limit:
        state.caller = dataclasses.replace(caller, key_rate_limit=key_rate_limit)
        if state.key_hash is not None:
            auth_cache.put(caller.slug, state.key_hash, state.caller)


def _current_instance(state: RequestState) -> McpInstance:
    """The caller's instance, fresh from the database, if the key and the instance are still valid."""
    for _attempt in range(2):
        caller = state.caller
        checks: dict[str, Any] = {"pk": caller.instance_id, "slug": caller.slug, "enabled": True}
        checks["owner__is_active"] = True  # issue 13: a deactivated owner's keys stop working
        if caller.api_key_id is not None:
            checks.update(api_keys__pk=caller.api_key_id, api_keys__revoked_at__isnull=True)
        instance = McpInstance.objects.select_related("owner").filter(**checks).first()
        if instance is not None and caller.oauth_token_id is not None and not oauth_token_live(caller):
            instance = None  # issue 16: the access token was revoked or expired since
        if instance is not None:
            if caller.api_key_id is not None:
                touch_key(caller.api_key_id)
            state.verified = True
            _follow_rate(state, instance.key_rate_limit)
            return instance
        auth_cache.discard(caller)
        try:
            state.caller = authenticate(caller.slug, state.key_hash, caller.base)
        except Denied as denied:
            raise _deny(state, denied) from None
    raise _deny(state, not_found(state.caller.slug))


#
# tools/list (SPEC §4.3, §4.5)
#


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
            content["request_id"] = rid  # issue 18: the id a user quotes (the answer's X-Request-ID)
    return _text_result(f"{error.code}: {error.message}", content, is_error=True)


def _error_data() -> dict[str, Any] | None:
    """The `data` of a JSON-RPC error toolhub raises: the request's id (issue 18), when there is one."""
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


def _call_target(state: RequestState, name: str) -> CallTarget:
    """The binding named `name` (any state; SPEC §2.4 names compare case-insensitively), with the re-check
    of key and instance in the same round trip. Raises the denial when the key or the instance is gone."""
    for _attempt in range(2):
        caller = state.caller
        target = binding_call_target(
            instance_id=caller.instance_id,
            slug=caller.slug,
            api_key_id=caller.api_key_id,
            oauth_token_id=caller.oauth_token_id,
            name=name,
        )
        if target is not None:
            state.verified = True
            _follow_rate(state, target.key_rate_limit or "")
            return target
        _current_instance(state)  # re-authenticates a stale cached caller, or raises the denial
    raise _deny(state, not_found(state.caller.slug))


INVALID_NAME = " Tool names are 1 to 64 characters from A-Z, a-z, 0-9, '_', '.' and '-'."


def call_tool_sync(state: RequestState, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Resolve `name` among the instance's bindings and run it through the pipeline; translate the outcome."""
    valid_name = TOOL_NAME_RE.fullmatch(name) is not None
    if valid_name:
        target = _call_target(state, name)
    else:
        # Cannot be a binding's name (SPEC §2.2): never sent to SQL (PostgreSQL refuses a NUL in text).
        instance = _current_instance(state)
        target = CallTarget(
            owner_id=instance.owner_id,
            instance_id=instance.pk,
            max_result_bytes=instance.max_result_bytes,
            instance_slug=instance.slug,
        )
    holder = state.caller
    if holder.oauth_token_id is not None and target.enabled and not scope_allows(holder.scopes, target.tool_type):
        # Issue 16: outside the token's scope: HTTP 403 insufficient_scope, nothing run or recorded.
        raise _deny(state, insufficient_scope(name))
    caller = Caller(
        surface=Surface.MCP,
        user_id=holder.oauth_user_id if holder.oauth_user_id is not None else target.owner_id,
        api_key_id=holder.api_key_id,
        oauth_client=holder.oauth_client,
    )
    outcome = run_tool_call(caller=caller, target=target, name=name, arguments=arguments or {})
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
    state = _state(ctx)
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
            ToolError(ErrorCode.INTERNAL_ERROR, "The call failed unexpectedly; the error was logged on the server."),
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
    """The SDK's OpenTelemetryMiddleware when tracing is on (tools_app.telemetry); a plain pass-through
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
    from django import get_version

    server = Server(
        "toolhub",
        version=f"django-{get_version()}",
        title="toolhub",
        on_list_tools=functools.partial(_on_list_tools, hops),
        on_call_tool=functools.partial(_on_call_tool, hops),
        get_tool_input_schema=_no_header_parameters,
    )
    # The SDK's OpenTelemetry middleware runs only while tracing is on (TracingMiddleware): its span of
    # each method continues the `traceparent` in the request's params._meta (issue 18).
    server.middleware = [TracingMiddleware(), InstanceMiddleware(hops)]
    return server


__all__ = ["RequestState", "build_server", "call_tool_sync", "list_tools_sync"]
