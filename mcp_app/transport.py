"""The MCP endpoint, /mcp/<slug>/ (SPEC §4): an ASGI app in front of the SDK's stateless transport.

Request path (McpEndpoint.__call__):
1. Host/Origin and the bearer key are checked before the SDK sees anything (mcp_app.auth); refusals
   are plain HTTP answers (400/401/403/404/405/413). An authenticated request is then counted against
   its key's rate (mcp_app.rate_limit): over it, 429 with Retry-After and a JSON-RPC error. A body
   that is not one well-formed JSON-RPC message is answered here, -32700 or -32600 (mcp_app.messages),
   after a fresh key check.
2. The SDK's StreamableHTTPSessionManager (stateless, JSON responses) serves both protocol eras:
   the 2025-11-25 handshake and the session-less 2026-07-28 revision. A request that asks for progress or
   log notifications (a progress token, a log level in `_meta`), and a 2025-11-25 tools/call on an instance
   with a log level (McpInstance.log_level), go to a second, streaming manager: the answer is an SSE stream
   carrying them, ended by the result (nothing outlives the request).
3. The protocol handlers (mcp_app.handlers) re-check the key and the instance in their database hop. An
   answer the SDK gives without reaching a handler (a refused header, params that fail its validation)
   goes out only after a fresh key check too (_guard_send).
"""

import asyncio
import json
import logging
import re
import time
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_app.auth import (
    Denied,
    auth_cache,
    authenticate,
    check_host_and_origin,
    key_hash_from_header,
    refusal_without_database,
)
from mcp_app.handlers import build_server
from mcp_app.hops import DatabaseHops
from mcp_app.messages import REQUEST, Problem, classify, is_tool_call, wants_stream
from mcp_app.rate_limit import refuse_over_rate
from mcp_app.requests import STATE_KEY, RequestState
from tools_app.kernel import limits, telemetry
from tools_app.oauth import SCOPE_ALL, public_base
from tools_app.services.refusals import refusals

logger = logging.getLogger(__name__)

SLUG_PATH = re.compile(r"^/mcp/(?P<slug>[-a-zA-Z0-9_]+)/?$")


def _db_threads() -> int:
    return limits.MCP_DB_THREADS.get()


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


def _logs_every_call(caller: Any, scope: dict, body: bytes) -> bool:
    """A tools/call of a handshake-era client (2025-11-25 and before) that accepts a stream, on an
    instance with a log level: answered with a stream carrying the call's log messages (handlers._Notifier).

    By the caller's hint (auth_cache): the handler re-reads the level in the call's own query and sends what
    it says, so a stale hint only changes the answer's form, for one request of this worker. 2026-07-28
    requests are left out: that revision sends logs only to a request that asks in its `_meta` (wants_stream).
    """
    if not caller.log_level:
        return False
    if (_header(scope, b"mcp-protocol-version") or "") in MODERN_PROTOCOL_VERSIONS:
        return False
    if "text/event-stream" not in (_header(scope, b"accept") or ""):
        return False
    return is_tool_call(body)


async def send_denied(send: Any, denied: Denied) -> None:
    """A refusal before the SDK: its HTTP status and headers (WWW-Authenticate for 401), with a JSON-RPC error
    body (id null: the request was not read), so that MCP clients show why (item 8). `data` keeps
    the REST-style name and message (SPEC §8 code names), and the request id when on."""
    if denied.status == 401:
        telemetry.auth_failed("mcp")
    name = _ERROR_NAMES.get(denied.status, "ERROR")
    data: dict[str, Any] = {"error": name, "message": denied.message, "status": denied.status}
    if (rid := telemetry.error_request_id()) is not None:
        data["request_id"] = rid
    error = {
        "code": _JSONRPC_CODES.get(denied.status, INVALID_REQUEST),
        "message": f"{name}: {denied.message}",
        "data": data,
    }
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()
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
    503: "UNAVAILABLE",
}
# JSON-RPC has no codes for HTTP refusals: -32001 is the code MCP servers commonly use for "unauthorized";
# the others are Invalid Request, or Internal error for a server that cannot answer now.
_JSONRPC_CODES = {401: -32001, 503: INTERNAL_ERROR}


#
# Body size cap (docs/input-limits.md)
#


def max_body_bytes() -> int:
    """TOOLHUB_MAX_MCP_REQUEST_BYTES: the largest POST body an MCP endpoint reads (default 4 MiB)."""
    return limits.MAX_MCP_REQUEST_BYTES.get()


def declares_too_large(scope: dict, limit: int) -> bool:
    """Whether the request's Content-Length is over `limit` (max_body_bytes()): answered 413 without reading the
    body."""
    declared = _header(scope, b"content-length")
    return declared is not None and declared.isdigit() and int(declared) > limit


async def send_too_large(send: Any) -> None:
    """HTTP 413 with a JSON-RPC error (id null: the request was not read), naming REQUEST_TOO_LARGE and the limit."""
    limit = max_body_bytes()
    error = {
        "code": INVALID_REQUEST,
        "message": f"REQUEST_TOO_LARGE: the request body is over the limit of {limit} bytes "
        "(TOOLHUB_MAX_MCP_REQUEST_BYTES).",
        "data": {"error": "REQUEST_TOO_LARGE", "limit_bytes": limit},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of the body is never read
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole request body, or None as soon as it passes `limit` (max_body_bytes(); the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
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


def with_resource_metadata(send: Any, base: str, slug: str) -> Any:
    """`send`, with the OAuth hints added to a Bearer challenge (RFC 9728 §5.1): a 401 or 403 from
    /mcp/<slug>/ names the instance's protected resource metadata, and a 401 the scope to ask for."""
    if not limits.OAUTH_ENABLED.get():
        return send
    metadata = f"{base}/.well-known/oauth-protected-resource/mcp/{slug}/"

    async def hinted(message: dict) -> None:
        if message["type"] == "http.response.start" and message["status"] in (401, 403):
            headers = []
            for name, value in message.get("headers") or ():
                if name.lower() == b"www-authenticate" and value.lower().startswith(b"bearer"):
                    text = value.decode("latin-1")
                    if "scope=" not in text:
                        text += f', scope="{SCOPE_ALL}"'
                    value = f'{text}, resource_metadata="{metadata}"'.encode("latin-1")
                headers.append((name, value))
            message = {**message, "headers": headers}
        await send(message)

    return hinted


class McpEndpoint:
    """The ASGI app for /mcp/<slug>/; `running()` must be entered once (the ASGI lifespan does it).

    `db_threads`: size of the database thread pool (DatabaseHops); default TOOLHUB_MCP_DB_THREADS (4).
    """

    def __init__(self, *, db_threads: int | None = None) -> None:
        self.hops = DatabaseHops(_db_threads() if db_threads is None else db_threads)
        self.server = build_server(self.hops)
        self._manager: StreamableHTTPSessionManager | None = None
        self._streaming: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self):
        # Two managers over one server: JSON responses for every request, except a request that asked for
        # notifications (messages.wants_stream), which gets a streamed (SSE) response carrying them.
        manager, streaming = (
            StreamableHTTPSessionManager(
                app=self.server, stateless=True, json_response=json_response, max_request_body_size=max_body_bytes()
            )
            for json_response in (True, False)
        )
        self.hops.start()
        try:
            async with manager.run(), streaming.run():
                self._manager, self._streaming = manager, streaming
                try:
                    yield self
                finally:
                    self._manager = self._streaming = None
        finally:
            # Closing the pool's connections is blocking database work: off the event loop.
            await asyncio.get_running_loop().run_in_executor(None, self.hops.stop)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """Serve one request with its id (X-Request-ID, in error bodies too), its span when tracing is on
        (continuing a `traceparent` header) and its JSON log line when those are on."""
        info = telemetry.RequestInfo(id=telemetry.new_request_id(_header(scope, b"x-request-id")), surface="mcp")
        token = telemetry.REQUEST.set(info)
        started = time.perf_counter()
        status = 500
        header = (b"x-request-id", info.id.encode())

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        try:
            if telemetry.tracing_enabled():
                await self._traced(scope, receive, send_with_id)
            else:
                await self._serve(scope, receive, send_with_id)
        finally:
            telemetry.log_request(
                info,
                method=scope.get("method", ""),
                path=scope["path"],
                status=status,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
            telemetry.REQUEST.reset(token)

    async def _traced(self, scope: dict, receive: Any, send: Any) -> None:
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind

        parent = propagate.extract({"traceparent": _header(scope, b"traceparent") or ""})
        attributes = {"http.request.method": scope.get("method", ""), "toolhub.request_id": telemetry.request_id()}
        with telemetry.tracer().start_as_current_span(
            f"{scope.get('method', '')} mcp", context=parent, kind=SpanKind.SERVER, attributes=attributes
        ):
            await self._serve(scope, receive, send)

    async def _serve(self, scope: dict, receive: Any, send: Any) -> None:
        match = SLUG_PATH.match(scope["path"])
        if match is None:
            await send_denied(send, Denied(404, "MCP endpoints are /mcp/<slug>/."))
            return
        slug = match["slug"]
        host = _header(scope, b"host")
        base = public_base(scope.get("scheme") or "http", host or "")
        send = with_resource_metadata(send, base, slug)
        try:
            check_host_and_origin(host, _header(scope, b"origin"))
        except Denied as denied:
            await send_denied(send, denied)
            return
        body = b""
        if scope["method"] == "POST":
            limit = max_body_bytes()
            read = None if declares_too_large(scope, limit) else await _read_body(receive, limit)
            if read is None:
                await send_too_large(send)
                return
            body = read
        key_hash = key_hash_from_header(_header(scope, b"authorization"))
        message = classify(body) if scope["method"] == "POST" else None
        # A cached caller is only trusted for a well-formed request, which reaches a handler or the
        # middleware that re-checks it; anything else is checked against the database now (SPEC §4.2).
        caller = auth_cache.get(slug, key_hash) if message == REQUEST else None
        if caller is not None and caller.oauth_token_id is not None and caller.base != base:
            caller = None  # a token's audience was checked against another origin: check it against this one
        verified = caller is None
        if caller is None and (refusal := refusal_without_database(slug, key_hash)) is not None:
            # A key that can never be valid costs no database connection.
            await send_denied(send, refusal)
            return
        if caller is None:
            try:
                caller = await self.hops.run(authenticate, slug, key_hash, base)
            except Denied as denied:
                await send_denied(send, denied)
                return
        info = telemetry.REQUEST.get()
        if info is not None:
            info.api_key_id, info.instance = caller.api_key_id, caller.slug
        if await refuse_over_rate(caller, body, send):  # Counted per key, 429 over the rate
            if refusals.due():  # the refusals counted for the activity page, written after the answer
                await self.hops.run(refusals.flush)
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
        streamed = self._streaming is not None and (wants_stream(body) or _logs_every_call(caller, scope, body))
        state = RequestState(caller=caller, key_hash=key_hash, verified=verified, streamed=streamed)
        scope = {**scope, STATE_KEY: state}
        manager = self._streaming if streamed and self._streaming is not None else self._manager
        await manager.handle_request(scope, _replay(body, receive), self._guard_send(send, state))

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
            state.caller = await self.hops.run(authenticate, state.caller.slug, state.key_hash, state.caller.base)
            state.verified = True
        except Denied as denied:
            state.denied = denied
        except Exception:
            logger.exception("Could not re-check the key for /mcp/%s/", state.caller.slug)
            state.denied = Denied(503, "toolhub could not check the API key; the error was logged. Try again.")


__all__ = ["McpEndpoint", "send_denied"]
