"""The size bound of a dynamic client registration's body (RFC 7591 `POST /oauth/register/`, RFC 7592 `PUT
/oauth/register/<client_id>/`), in a module without models: the ASGI body cap (toolhub.request_limits)
applies it from the declared length before Django's ASGI handler reads the body (which it reads whole,
before any view), and oauth_app.registration applies it again to a body that declared no length."""

import json
import re

from tools_app.kernel import limits

__all__ = ["REGISTRATION_PATH", "max_registration_bytes", "refusal_body", "too_large_description"]

REGISTRATION_PATH = re.compile(r"/oauth/register/(?:[^/]+/)?")
SETTING = limits.OAUTH_DCR_MAX_BODY_BYTES.setting


def max_registration_bytes() -> int:
    return limits.OAUTH_DCR_MAX_BODY_BYTES.get()


def too_large_description(size: int | None) -> str:
    """The refusal's description: the body's `size` in bytes, or None when it declared none (cut once over)."""
    limit = max_registration_bytes()
    stated = f"{size} bytes" if size is not None else f"over {limit} bytes"
    return f"The registration is {stated}; at most {limit} bytes are accepted ({SETTING})."


def refusal_body(description: str) -> bytes:
    """A registration's refusal (400, RFC 7591 §3.2.2), as JSON."""
    return json.dumps({"error": "invalid_client_metadata", "error_description": description}).encode()
