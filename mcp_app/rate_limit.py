"""Rate limits on /mcp/<slug>/: one request counted per authenticated HTTP request, per API key.

Called by the endpoint (mcp_app.transport) once the key is known and before the SDK sees the request, so a
refused request runs nothing and writes nothing (no call log row, no use count, no key last-use); it is counted
in memory for the owner's activity page (tools_app.services.refusals), written by the endpoint when due. The rule,
the store and the message are tools_app.kernel.rate_limits', shared with the API's throttles.

Over the limit the answer is HTTP 429 with `Retry-After` (whole seconds) and a JSON-RPC error body, as
the endpoint's other HTTP-level refusals are answered before any MCP processing:
`{"jsonrpc": "2.0", "id": <the request's id, or null>, "error": {"code": -32029, "message":
"RATE_LIMITED: ...", "data": {"error": "RATE_LIMITED", "message": ..., "details": {...}}}}`.
"""

import json
from typing import Any

from mcp_app.auth import Credential
from tools_app.kernel import rate_limits, telemetry
from tools_app.services.refusals import refusals

# JSON-RPC leaves -32000..-32099 to the server; -32029 is toolhub's "rate limited" (429).
RATE_LIMITED_RPC_CODE = -32029

__all__ = ["RATE_LIMITED_RPC_CODE", "refuse_over_rate", "send_rate_limited"]


def _request_id(body: bytes) -> Any:
    """The JSON-RPC id of a well-formed request body, else None (JSON null)."""
    try:
        message = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


async def send_rate_limited(send: Any, limited: rate_limits.RateLimited, request_id: Any = None) -> None:
    data = limited.as_dict()
    if (rid := telemetry.error_request_id()) is not None:
        data["request_id"] = rid
    error = {"code": RATE_LIMITED_RPC_CODE, "message": str(limited), "data": data}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(limited.retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def refuse_over_rate(caller: Credential, body: bytes, send: Any) -> bool:
    """Count this request against the caller's key; over its rate, answer 429 and return True."""
    rate = rate_limits.mcp_key_rate(caller.key_rate_limit)
    try:
        await rate_limits.ahit(rate_limits.Bucket.of(rate_limits.MCP_KEY, caller.rate_identity, rate))
    except rate_limits.RateLimited as limited:
        # Counted for the owner's activity page: in memory here; the endpoint writes the counts when due.
        refusals.count(owner_id=caller.owner_id, instance_id=caller.instance_id, scope=rate_limits.MCP_KEY)
        await send_rate_limited(send, limited, _request_id(body))
        return True
    return False
