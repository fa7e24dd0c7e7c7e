"""What every MCP handler of a request shares: its state in the ASGI scope, the re-check of the key (or
OAuth token) and the instance, denials, list cursors, and resolving a tool name to its call target.

The tool handlers (mcp_app.handlers) and the resources, prompts and completion (mcp_app.features) both
build on this module; neither imports the other's internals.
"""

import base64
import binascii
import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_app.auth import Credential, Denied, auth_cache, authenticate, insufficient_scope, not_found, oauth_token_live
from tools_app.execution.pipeline import Caller, CallTarget, touch_key
from tools_app.grants import Grant
from tools_app.kernel.limits import MCP_PAGE_SIZE
from tools_app.models import McpInstance, Surface
from tools_app.oauth import SCOPE_ALL, scope_allows
from tools_app.selectors import binding_call_target

STATE_KEY = "toolhub.mcp"
DENIED_CODE = -32001  # the JSON-RPC error a denied request raises inside the SDK; never sent (transport)


def page_size() -> int:
    return MCP_PAGE_SIZE.get()


#
# Per-request state, carried in the ASGI scope (reaches the handlers as ctx.request.scope on both eras)
#


@dataclass(slots=True)
class RequestState:
    """`verified`: the key and the instance were read from the database during this request (by the
    endpoint, or by a handler's re-check). An answer sent without it is checked first (_guard_send)."""

    caller: Credential  # the instance and the key that opened the request (mcp_app.auth)
    key_hash: str | None
    denied: Denied | None = None
    verified: bool = False
    # The request asked for progress or log notifications, so its answer may be a stream (transport).
    streamed: bool = False


def request_state(ctx: Any) -> RequestState:
    request = getattr(ctx, "request", None)
    state = request.scope.get(STATE_KEY) if request is not None else None
    if state is None:
        raise MCPError(types.INTERNAL_ERROR, "This server only answers through toolhub's MCP endpoint.")
    return state


class RequestDenied(MCPError):
    """Raised inside the SDK when the re-check fails; the HTTP answer is replaced by the denial."""


def deny(state: RequestState, denied: Denied) -> RequestDenied:
    state.denied = denied
    return RequestDenied(DENIED_CODE, denied.message)


def follow_instance(state: RequestState, key_rate_limit: str, log_level: str) -> None:
    """The endpoint counted this request with the rate its auth hint held (mcp_app.rate_limit), and chose a
    JSON or a streamed answer by the log level it held (transport); when the instance's rate or log level
    changed since, the hint follows, so this worker's next request uses the new values. The log messages of
    this request already follow the level just read (_Notifier reads state.caller)."""
    caller = state.caller
    if caller.key_rate_limit != key_rate_limit or caller.log_level != log_level:
        state.caller = dataclasses.replace(caller, key_rate_limit=key_rate_limit, log_level=log_level)
        if state.key_hash is not None:
            auth_cache.put(caller.slug, state.key_hash, state.caller)


def current_instance(state: RequestState) -> McpInstance:
    """The caller's instance, fresh from the database, if the key and the instance are still valid."""
    for _attempt in range(2):
        caller = state.caller
        checks: dict[str, Any] = {"pk": caller.instance_id, "slug": caller.slug, "enabled": True}
        checks["owner__is_active"] = True  # A deactivated owner's keys stop working
        if caller.api_key_id is not None:
            checks.update(api_keys__pk=caller.api_key_id, api_keys__revoked_at__isnull=True)
        # The owner comes along (the registry's quota and the tools it creates name them), not their password hash.
        instance = McpInstance.objects.select_related("owner").defer("owner__password").filter(**checks).first()
        if instance is not None and caller.oauth_token_id is not None and not oauth_token_live(caller):
            instance = None  # The access token was revoked or expired since
        if instance is not None:
            if caller.api_key_id is not None and caller.admin_user_id is None:
                touch_key(caller.api_key_id)
            state.verified = True
            follow_instance(state, instance.key_rate_limit, instance.log_level)
            return instance
        auth_cache.discard(caller)
        try:
            state.caller = authenticate(caller.slug, state.key_hash, caller.base)
        except Denied as denied:
            raise deny(state, denied) from None
    raise deny(state, not_found(state.caller.slug))


def encode_cursor(name_key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": name_key}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        after = None
    if not isinstance(after, str):
        raise MCPError(types.INVALID_PARAMS, "Invalid cursor: pass the nextCursor of a previous tools/list result.")
    return after


def call_target(state: RequestState, name: str) -> CallTarget:
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
            in_admin=caller.admin_user_id is not None,
        )
        if target is not None:
            state.verified = True
            follow_instance(state, target.key_rate_limit or "", target.log_level or "")
            return target
        current_instance(state)  # re-authenticates a stale cached caller, or raises the denial
    raise deny(state, not_found(state.caller.slug))


READ_SCOPE_TOKEN = f"this access token was granted only tools that read (scope {SCOPE_ALL!r} is needed)"


@functools.lru_cache(maxsize=1024)
def grant_of(credential: Credential) -> Grant:
    """What the caller that opened the request may use (tools_app.grants): every surface of the request
    (tools/list, resources, prompts, the registry, tools/call) asks this one Grant.

    Both are immutable and the Grant is made from the Credential alone, so it is made once per Credential
    (the auth cache hands the same one to every request of a key), not on every call."""
    if credential.api_key_id is not None:
        return Grant.of_key(
            read_only=credential.key_read_only,
            label=credential.key_label,
            attributes=dict(credential.key_attributes),
            username=credential.username,
        )
    return Grant(
        writes=SCOPE_ALL in credential.scopes,
        username=credential.username or None,
        read_only_reason=READ_SCOPE_TOKEN,
    )


def caller_for(state: RequestState, target: CallTarget, name: str) -> Caller:
    """Who calls `target` (named `name`) in the pipeline: the key's instance owner, or the user who authorized
    the OAuth token, with what it may use (grant_of; the pipeline refuses a tool outside it as TOOL_NOT_FOUND).
    A token whose scope does not cover a tool it could use with `tools:all`: HTTP 403 insufficient_scope (the
    client may authorize again with that scope), nothing run or recorded."""
    holder = state.caller
    if holder.admin_user_id is not None:
        # The admin's "as a client" page: the key's or the signed-in owner's set of tools, run and recorded as
        # the admin user on surface "admin" (like the tool's try-it); the key is not used (nor touched).
        return Caller(surface=Surface.ADMIN, user_id=holder.admin_user_id, grant=grant_of(holder))
    if (
        holder.oauth_token_id is not None
        and target.enabled
        and not target.read_only
        and not scope_allows(holder.scopes, target.tool_type)
    ):
        raise deny(state, insufficient_scope(name))
    return Caller(
        surface=Surface.MCP,
        user_id=holder.oauth_user_id if holder.oauth_user_id is not None else target.owner_id,
        api_key_id=holder.api_key_id,
        oauth_client=holder.oauth_client,
        grant=grant_of(holder),
    )
