"""The shape of a POSTed JSON-RPC message, checked before the MCP SDK sees it (SPEC §4.1).

JSON-RPC 2.0 answers a body that is not JSON with -32700 Parse error and a body that is not a valid
request object with -32600 Invalid Request. The SDK's two transports disagree here: the 2025 one
answers most malformed bodies with -32602 and a multi-line pydantic dump, and accepts a request
whose id is null or fractional as a notification (202, never answered); the 2026-07-28 one gives one
generic -32600. Checking here gives both eras the same answer with a message naming what is wrong,
sent with the HTTP status the SDK uses for its own parse errors (400) and `"id": null`, as JSON-RPC
requires when the request's id could not be determined.

Pure functions: no database, no Django.
"""

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import INVALID_REQUEST, PARSE_ERROR

from tools_app.validators import JSONNumberError, json_loads

REQUEST = "request"
NOTIFICATION = "notification"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a body is not a JSON-RPC message this endpoint accepts: a JSON-RPC error code and message."""

    code: int
    message: str

    def body(self) -> bytes:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": self.code, "message": self.message}}
        return json.dumps(error, separators=(",", ":")).encode()


def _kind_of(value: Any) -> str:
    """How a message names a wrong value: scalars as they are written (short), containers by kind."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    return json.dumps(value)[:40]


def _invalid(message: str) -> Problem:
    return Problem(INVALID_REQUEST, f"Invalid Request: {message}")


def classify(body: bytes) -> str | Problem:
    """REQUEST (a single request: it has an "id"), NOTIFICATION, or the Problem to answer with."""
    try:
        message = json_loads(body)
    except RecursionError:
        return Problem(PARSE_ERROR, "Parse error: the body is nested too deeply.")
    except JSONNumberError as exc:  # an over-long integer, a number beyond a float: named, with where it is
        return Problem(PARSE_ERROR, f"Parse error: {exc}")
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return Problem(PARSE_ERROR, f"Parse error: the body is not valid JSON ({exc}).")
    if isinstance(message, list):
        return _invalid("batches are not supported; send one JSON-RPC message per POST.")
    if not isinstance(message, dict):
        return _invalid(f"the body must be a JSON-RPC request object, not {_kind_of(message)}.")
    if message.get("jsonrpc") != "2.0":
        return _invalid('"jsonrpc" must be "2.0".')
    if "method" not in message:
        if "result" in message or "error" in message:
            return _invalid("this endpoint is stateless and sends no requests, so it takes no responses.")
        return _invalid('"method" is missing.')
    if not isinstance(message["method"], str):
        return _invalid(f'"method" must be a string, not {_kind_of(message["method"])}.')
    if "params" in message and message["params"] is not None and not isinstance(message["params"], dict):
        return _invalid(f'"params" must be an object (MCP parameters are named), not {_kind_of(message["params"])}.')
    if "id" not in message:
        return NOTIFICATION
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return _invalid(f'"id" must be a string or an integer, not {_kind_of(request_id)}.')
    return REQUEST


# What a request carries in `_meta` to ask for notifications on its own answer: a progress token
# (both eras), a log level (2026-07-28, io.modelcontextprotocol/logLevel).
_STREAM_MARKERS = (b'"progressToken"', b'"io.modelcontextprotocol/logLevel"')


def wants_stream(body: bytes) -> bool:
    """Whether a request may need a streamed answer: it names a progress token or a log level.

    A byte search, not a parse (the body is parsed by the SDK): the same words inside arguments only cost
    the request a streamed answer, which the SDK sends as plain JSON when nothing is notified (2026-07-28)
    or as a stream with just the result (2025-11-25); both are valid answers to a client that may stream.
    """
    return any(marker in body for marker in _STREAM_MARKERS)


def is_tool_call(body: bytes) -> bool:
    """Whether the body is a tools/call request (parsed: asked only for instances with a log level)."""
    if b'"tools/call"' not in body:
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message


__all__ = ["NOTIFICATION", "REQUEST", "Problem", "classify", "is_tool_call", "wants_stream"]
