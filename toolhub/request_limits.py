"""Request bodies over TOOLHUB_MAX_REQUEST_BYTES get 413 REQUEST_TOO_LARGE (docs/input-limits.md).

Two guards, one answer:
- `cap_request_body` wraps Django's ASGI application (toolhub.asgi, what uvicorn serves). Django's ASGI
  handler reads a whole body into a spooled file before any middleware runs, so the guard answers 413
  from the declared Content-Length without reading the body, and stops a body that declares no length
  (chunked) as soon as it passes the limit.
- `RequestSizeLimitMiddleware` does the same from Content-Length for WSGI (toolhub.wsgi), where the body
  is read lazily, and for Django's test client.

The import endpoint (IMPORT_PATH) takes files far larger than any other body: its limit is
TOOLHUB_MAX_IMPORT_BYTES (Django spools the upload to disk; the import streams it into rows). A dynamic client
registration (oauth_app.registration_body.REGISTRATION_PATH: open to anyone) has a far smaller one,
TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES, and its own answer: 400 `invalid_client_metadata` naming the size, as the
registration view gives (RFC 7591 §3.2.2), so that a registration of tens of MB is refused before a byte of
it is read instead of after Django has spooled it.

The API gets the API's error shape, `{"error": "REQUEST_TOO_LARGE", "message": ...}`; the admin a short
page saying the same. /mcp/<slug>/ has its own limit and JSON-RPC answer (mcp_app.transport).
"""

import html
import json
from typing import Any

from django.http import HttpResponse

from oauth_app.registration_body import REGISTRATION_PATH, max_registration_bytes, refusal_body, too_large_description
from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode
from tools_app.kernel.limits import MAX_IMPORT_BYTES, MAX_REQUEST_BYTES

__all__ = [
    "IMPORT_PATH",
    "RequestSizeLimitMiddleware",
    "cap_request_body",
    "max_request_bytes",
    "refused",
    "too_large_answer",
]

IMPORT_PATH = "/api/tables/import/"


def _limit(path: str | None) -> tuple[int, str]:
    """The body limit for a request to `path` and the setting that holds it."""
    if path == IMPORT_PATH:
        return MAX_IMPORT_BYTES.get(), MAX_IMPORT_BYTES.setting
    if path is not None and REGISTRATION_PATH.fullmatch(path):
        return max_registration_bytes(), "TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES"
    return MAX_REQUEST_BYTES.get(), MAX_REQUEST_BYTES.setting


def max_request_bytes(path: str | None = None) -> int:
    """The body limit for a request to `path` (TOOLHUB_MAX_REQUEST_BYTES; the import's TOOLHUB_MAX_IMPORT_BYTES)."""
    return _limit(path)[0]


def refused(path: str, declared: int | None) -> tuple[int, str, bytes]:
    """(status, content type, body) of the answer to a request to `path` over its limit (`declared`: its
    declared length, None when it declared none): a registration's own 400, else too_large's 413."""
    if REGISTRATION_PATH.fullmatch(path):
        return 400, "application/json", refusal_body(too_large_description(declared))
    return 413, *too_large_answer(path)


def too_large_answer(path: str) -> tuple[str, bytes]:
    """(content type, body) of the 413 answer for a request to `path`."""
    limit, setting = _limit(path)
    message = f"The request body is over the limit of {limit} bytes ({setting})."
    if path.startswith("/admin/"):
        page = f"<!doctype html><title>Request too large</title><h1>Request too large</h1><p>{html.escape(message)}</p>"
        return "text/html; charset=utf-8", page.encode()
    body = {"error": ErrorCode.REQUEST_TOO_LARGE.value, "message": message}
    if (rid := telemetry.error_request_id()) is not None:
        body["request_id"] = rid  # (the ASGI-level refusal runs before Django: no id there)
    return "application/json", json.dumps(body).encode()


def _declared_length(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


class RequestSizeLimitMiddleware:
    """First middleware: a request whose Content-Length is over the limit is answered 413 unread."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        declared = _declared_length(request.META.get("CONTENT_LENGTH"))
        if declared is not None and declared > max_request_bytes(request.path):
            status, content_type, body = refused(request.path, declared)
            return HttpResponse(body, status=status, content_type=content_type)
        return self.get_response(request)


async def _send_too_large(send: Any, path: str, declared: int | None) -> None:
    status, content_type, body = refused(path, declared)
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of the body is never read
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def cap_request_body(app: Any) -> Any:
    """`app` (an ASGI application) behind the body limit: see the module docstring."""

    async def capped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        limit = max_request_bytes(scope.get("path"))
        headers = dict(scope.get("headers") or ())
        declared = _declared_length(headers.get(b"content-length", b"").decode("latin-1"))
        if declared is not None and declared > limit:
            await _send_too_large(send, scope["path"], declared)
            return
        received = 0
        over = started = False

        async def counting_receive() -> dict:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request" and not over:
                received += len(message.get("body", b""))
                if received > limit:
                    over = True  # Django stops reading at a disconnect (RequestAborted) and answers nothing
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await app(scope, counting_receive, tracking_send)
        if over and not started:
            await _send_too_large(send, scope["path"], None)

    return capped
