"""The request in progress (its id, surface, user or key, instance) and the JSON log lines."""

import contextvars
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tools_app.kernel.limits import REQUEST_ID_IN_ERRORS

requests_logger = logging.getLogger("toolhub.requests")
calls_logger = logging.getLogger("toolhub.calls")

REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


@dataclass(slots=True)
class RequestInfo:
    id: str
    surface: str
    user_id: int | None = None
    api_key_id: int | None = None
    instance: str | None = None


REQUEST: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar("toolhub_request", default=None)


def new_request_id(sent: str | None = None) -> str:
    """The request's id: the client's X-Request-ID when it is a short token of safe characters, else new: the
    hex of a random UUID (version 4), as uuid.uuid4().hex writes it, without building the UUID object (every
    request makes one)."""
    if sent is not None and REQUEST_ID_RE.match(sent):
        return sent
    return f"{int.from_bytes(os.urandom(16)) & _UUID4_CLEAR | _UUID4_SET:032x}"


# What uuid.UUID(version=4) changes in 128 random bits: the variant (RFC 4122: 10 in bits 62-63) and the
# version (4 in bits 76-79).
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def request_id() -> str | None:
    current = REQUEST.get()
    return current.id if current is not None else None


def error_request_id() -> str | None:
    """The id an error body carries as `request_id` (API error bodies, MCP error data), or None: when there
    is no request, or settings.TOOLHUB_REQUEST_ID_IN_ERRORS is off (the test suite's default, so that its
    exact comparisons of error bodies hold; the X-Request-ID header is always sent)."""
    current = REQUEST.get()
    if current is None:
        return None
    return current.id if REQUEST_ID_IN_ERRORS.get() else None


def log_request(info: RequestInfo, *, method: str, path: str, status: int, duration_ms: float) -> None:
    """The request's JSON log line (when TOOLHUB_JSON_LOGS is on). `path` is logged without its query."""
    if not json_logs_on:
        return
    emit(
        requests_logger,
        {
            "event": "request",
            "request_id": info.id,
            "surface": info.surface,
            "method": method[:16],
            "path": path[:200],
            "status": status,
            "user_id": info.user_id,
            "api_key_id": info.api_key_id,
            "instance": info.instance,
            "duration_ms": round(duration_ms, 3),
        },
    )


json_logs_on = False


def json_logs(on: bool | None = None) -> bool:
    """Whether the JSON log lines are written (settings.TOOLHUB_JSON_LOGS, read at start-up by the app
    config); `on` changes it (tests)."""
    global json_logs_on
    if on is not None:
        json_logs_on = on
    return json_logs_on


def emit(logger: logging.Logger, fields: dict[str, Any]) -> None:
    fields = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"), **fields}
    logger.info(json.dumps(fields, separators=(",", ":"), ensure_ascii=False, default=str))
