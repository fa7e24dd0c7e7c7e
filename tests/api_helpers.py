"""Helpers for the API tests: clients for a user, and a snapshot of every row to prove nothing was written."""

import asyncio
import json
from typing import Any

from asgiref.sync import async_to_sync
from django.apps import apps
from rest_framework.test import APIClient

# Every model an API request could write (auth tokens included: a denied request must not mint one).
WATCHED_MODELS = (
    "tools_app.Table",
    "tools_app.TableChange",
    "tools_app.Tool",
    "tools_app.McpInstance",
    "tools_app.ApiKey",
    "tools_app.Binding",
    "tools_app.Prompt",
    "tools_app.CallLog",
    "tools_app.ApiToken",
    "admin.LogEntry",
)


def client_for(user=None) -> APIClient:
    """An APIClient authenticated as `user` (anonymous when None)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def response_bytes(response) -> bytes:
    """The body of a test client's response, streamed (a rows table's whole-table answers and download) or not."""
    return b"".join(response.streaming_content) if response.streaming else response.content


def response_json(response) -> Any:
    """The JSON body of a test client's response, streamed (a rows table's whole-table answers) or not."""
    return json.loads(response_bytes(response))


def db_snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of the watched models, field by field, in a stable order."""
    snapshot = {}
    for label in WATCHED_MODELS:
        model = apps.get_model(label)
        snapshot[label] = list(model.objects.order_by("pk").values())
    return snapshot


def asgi_post(
    app,
    path: str,
    chunks: list[bytes],
    headers: list[tuple[bytes, bytes]],
    *,
    client: str = "127.0.0.1",
    content_type: bytes = b"application/json",
) -> tuple[int, bytes, int, dict[str, str]]:
    """POST `chunks` (of a `content_type` body) to the ASGI `app` from the address `client`: (status, body, how
    many chunks the app read, the answer's headers)."""
    sent: list[dict] = []
    pending = list(chunks)
    read = 0

    answered = asyncio.Event()

    async def receive() -> dict:
        nonlocal read
        if not pending:
            # The client stays connected until the answer is complete, as a real one does (Django watches for
            # a disconnect while its view runs and drops the answer when one comes).
            await answered.wait()
            return {"type": "http.disconnect"}
        read += 1
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", content_type), *headers],
        "client": (client, 5000),
        "server": ("testserver", 80),
    }
    async_to_sync(app)(scope, receive, send)
    start = next(message for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    answer_headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in start["headers"]}
    return start["status"], body, read, answer_headers
