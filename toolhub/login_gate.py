"""Every endpoint where a request can make the server hash a password or a secret takes its hashing slot before
Django runs (toolhub.asgi).

A password (or client-secret) hash costs about half a second of CPU on purpose, and anyone can ask for one.
toolhub.passwords bounds the hashes running at once on the machine; this gate applies that bound at the door
of every endpoint that can hash, so that the requests it refuses cost nothing but their HTTP request: no
thread, no middleware, no query, no parsing beyond the request itself. Under a burst of bad credentials from
any number of addresses, the requests that get through are the ones the machine can hash, and everyone
else's requests keep the cores and the database pool.

The doors (DOORS below), all `POST`; when a request can hash there; the `token` bucket the gate counts it in:

- `/api/auth/token/`: always (a wrong password, an unknown user: Django hashes anyway); the address.
- `/admin/login/`: always; none (django-axes counts failures).
- `/oauth/token/`, `/oauth/revoke/`: when the request carries a client secret (`Authorization: Basic`, or a
  non-empty `client_secret` in the body or the query); `oauth:<address>`.
- `/oauth/register/`: always (django-oauth-toolkit hashes every new client's secret, a public client's
  too); `oauth:<address>`.
- `/admin/password_change/`, `/admin/auth/user/add/`, `/admin/auth/user/<id>/password/`,
  `/admin/oauth_app/client/add/`, `/admin/oauth_app/client/<id>/change/`: with a session cookie (without
  one, Django answers before any form is looked at); none.

A token request without a client secret (a public client: PKCE, a refresh) never hashes
(oauth_app.validators refuses a confidential client's id sent without its secret without hashing), so it
passes untouched: an attack on client secrets never refuses an MCP client its tokens.

For a door's request that can hash:

1. The body is read first (TOOLHUB_MAX_REQUEST_BYTES still bounds it): a slow client holds its own
   connection, never a slot.
2. It takes one of the machine's slots (toolhub.passwords.take_slot_for_request). None free: 429
   RATE_LIMITED, `Retry-After: 1` (the admin: a short page saying the same), and Django never sees the
   request. Such a refusal costs a few system calls and is not counted anywhere: no query, no round trip
   to the rate-limit store (under a burst of hundreds, those round trips were what slowed everyone else).
3. With the slot, a door with a bucket counts the request in its address's `token` bucket (the same bucket as
   the view's own count, which then does not count it again): an address over its rate gives the slot back
   and is refused, 429 with `Retry-After`. So each address gets at most its rate of hashes, however fast it
   retries: an address that hammers wins the slot no more often than its rate allows.
4. The request runs in Django holding that slot (its hash runs in it); the slot is given back as soon as the
   answer starts, whatever the answer.

Other methods and paths, and a door's requests that cannot hash, pass through untouched.
"""

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings

from toolhub.lockout import JSON_PATHS
from toolhub.passwords import PasswordCheckBusy, take_slot_for_request
from tools_app.kernel import rate_limits
from tools_app.kernel.rate_limits import COUNTED_SCOPE_KEY

__all__ = ["COUNTED_SCOPE_KEY", "DOORS", "Door", "door_of", "gate_hashes"]

TOKEN_PATH = "/api/auth/token/"


@dataclass(frozen=True)
class Request:
    """What the gate knows of a request before Django: its headers (names lower-cased; a repeated one keeps
    its last value), query string and whole body."""

    headers: dict[bytes, bytes]
    query: bytes
    body: bytes


def _always(request: Request) -> bool:
    return True


def _carries_client_secret(request: Request) -> bool:
    """Whether the OAuth request authenticates its client with a secret: HTTP Basic (RFC 6749 §2.3.1), or a
    non-empty `client_secret` parameter (in the form body; the query too, which oauthlib also reads)."""
    if request.headers.get(b"authorization", b"")[:6].lower() == b"basic ":
        return True
    for part in (request.body, request.query):
        if b"client_secret" in part:  # the cheap test first; the parse only for a request that names it
            pairs = parse_qsl(part.decode("latin-1"), keep_blank_values=False, max_num_fields=1000)
            if any(name == "client_secret" and value for name, value in pairs):
                return True
    return False


def _has_session(request: Request) -> bool:
    """Whether the request sends a session cookie: without one Django cannot find a user, and an admin page
    that would hash answers a redirect to the login instead."""
    name = settings.SESSION_COOKIE_NAME
    cookies = request.headers.get(b"cookie", b"").decode("latin-1")
    return any(part.strip().startswith(f"{name}=") for part in cookies.split(";"))


@dataclass(frozen=True)
class Door:
    """An endpoint where a `POST` can make the server hash: its path (a full match), whether a given request
    can hash, and how its address is named in the `token` rate (None: the gate counts nothing)."""

    path: re.Pattern[str]
    hashes: Callable[[Request], bool]
    identity: Callable[[str], str] | None = None


def _path(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


DOORS = (
    # The view's throttle (tools_app.api.throttles.TokenRateThrottle) counts the address itself.
    Door(_path(re.escape(TOKEN_PATH)), _always, lambda address: address),
    Door(_path(r"/admin/login/"), _always),
    # The OAuth views' count (oauth_app.views.RateLimitedMixin) is `oauth:<address>`.
    Door(_path(r"/oauth/(?:token|revoke)/"), _carries_client_secret, lambda address: f"oauth:{address}"),
    Door(_path(r"/oauth/register/"), _always, lambda address: f"oauth:{address}"),
    Door(
        _path(
            r"/admin/(?:password_change|auth/user/add|auth/user/[^/]+/password"
            r"|oauth_app/client/add|oauth_app/client/[^/]+/change)/"
        ),
        _has_session,
    ),
)


def door_of(method: str, path: str) -> Door | None:
    """The door a request to `path` goes through, or None when it cannot make the server hash."""
    if method != "POST":
        return None
    return next((door for door in DOORS if door.path.fullmatch(path)), None)


async def _refuse(send: Any, path: str, status: int, message: str, details: dict, retry_after: int) -> None:
    if path.startswith(JSON_PATHS):
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


def gate_hashes(app: Any) -> Any:
    """`app` (an ASGI application) with every endpoint that can hash a password behind the machine's hashing
    slots."""

    async def gated(scope: dict, receive: Any, send: Any) -> None:
        door = door_of(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if door is None:
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

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        request = Request(
            {name.lower(): value for name, value in scope.get("headers", [])},
            scope.get("query_string", b""),
            b"".join(message.get("body", b"") for message in messages),
        )
        if not door.hashes(request):
            await app(scope, replay, send)
            return
        path = scope["path"]
        # 2. A slot, or a refusal now.
        try:
            slot = take_slot_for_request()
        except PasswordCheckBusy as busy:
            await _refuse(send, path, 429, busy.message, busy.details, busy.retry_after)
            return
        # 3. The address's token rate.
        if door.identity is not None and rate_limits.enabled():
            client = scope.get("client") or ("", 0)
            try:
                await rate_limits.ahit(rate_limits.Bucket.of(rate_limits.TOKEN, door.identity(client[0])))
            except rate_limits.RateLimited as limited:
                slot.close()
                await _refuse(send, path, 429, limited.message, limited.details, limited.retry_after)
                return
            scope = {**scope, COUNTED_SCOPE_KEY: True}

        # 4. Django answers holding it; the slot goes back as the answer starts.
        async def releasing_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                slot.release()
            await send(message)

        try:
            await app(scope, replay, releasing_send)
        finally:
            slot.close()

    return gated
