"""The login endpoints take their password-hashing slot before Django runs (toolhub.asgi).

A login costs a deliberately slow hash, and anyone can ask for one. toolhub.passwords bounds the hashes
running at once on the machine; this gate applies that bound at the door of the two login endpoints, so that
the logins it refuses cost nothing but their HTTP request: no thread, no middleware, no query, no parsing.
Under a burst of bad logins from any number of addresses, the requests that get through are the ones the
machine can hash, and everyone else's requests keep the cores.

For `POST /api/auth/token/` and `POST /admin/login/`:

1. The body is read first (it is small; TOOLHUB_MAX_REQUEST_BYTES still bounds it): a slow client holds its
   own connection, never a slot.
2. It takes one of the machine's slots (toolhub.passwords.take_slot_for_request). None free: 429
   RATE_LIMITED, `Retry-After: 1` (the admin: a short page saying the same), and Django never sees the
   request. Such a refusal costs a few system calls and is not counted anywhere: no query, no round trip
   to the rate-limit store (under a burst of hundreds, those round trips were what slowed everyone else).
3. With the slot, `/api/auth/token/` counts the request in its address's `token` bucket (the same bucket as
   the view's throttle, which then does not count it again): an address over its rate gives the slot back
   and is refused, 429 with `Retry-After`. So each address gets at most its rate of hashes, however fast it
   retries: an address that hammers wins the slot no more often than its rate allows.
4. The request runs in Django holding that slot (its hash runs in it); the slot is given back as soon as the
   answer starts, whatever the answer.

Other methods and paths pass through untouched.
"""

import html
import json
from typing import Any

from toolhub.passwords import PasswordCheckBusy, take_slot_for_request
from tools_app.api.throttles import COUNTED_SCOPE_KEY
from tools_app.kernel import rate_limits

__all__ = ["COUNTED_SCOPE_KEY", "LOGIN_PATHS", "gate_logins"]

TOKEN_PATH = "/api/auth/token/"
LOGIN_PATHS = (TOKEN_PATH, "/admin/login/")


async def _refuse(send: Any, path: str, status: int, message: str, details: dict, retry_after: int) -> None:
    if path.startswith("/api/"):
        content_type = b"application/json"
        body = json.dumps({"error": "RATE_LIMITED", "message": message, "details": details}).encode()
    else:
        content_type = b"text/html; charset=utf-8"
        body = (f"<!doctype html><title>Server busy</title><h1>Server busy</h1><p>{html.escape(message)}</p>").encode()
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def gate_logins(app: Any) -> Any:
    """`app` (an ASGI application) with its login endpoints behind the machine's hashing slots."""

    async def gated(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in LOGIN_PATHS:
            await app(scope, receive, send)
            return
        # 1. The whole body, before any slot is taken.
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        if messages[-1]["type"] == "http.disconnect":
            return  # the client left before its body was complete: nothing to answer, no slot taken
        path = scope["path"]
        # 2. A slot, or a refusal now.
        try:
            release = take_slot_for_request()
        except PasswordCheckBusy as busy:
            await _refuse(send, path, 429, busy.message, busy.details, busy.retry_after)
            return
        # 3. The address's token rate.
        if path == TOKEN_PATH and rate_limits.enabled():
            client = scope.get("client") or ("", 0)
            try:
                await rate_limits.ahit(rate_limits.Bucket.of(rate_limits.TOKEN, client[0]))
            except rate_limits.RateLimited as limited:
                release()
                await _refuse(send, path, 429, limited.message, limited.details, limited.retry_after)
                return
            scope = {**scope, COUNTED_SCOPE_KEY: True}

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        # 4. Django answers holding it; the slot goes back as the answer starts.
        async def releasing_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await app(scope, replay, releasing_send)
        finally:
            release()

    return gated
