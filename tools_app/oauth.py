"""OAuth 2.1 for MCP clients (docs/oauth.md): the rules both sides share.

The authorization server (oauth_app, on django-oauth-toolkit) issues tokens; the MCP endpoint (mcp_app)
accepts them. What a token may reach is decided here, once:

- its audience (RFC 8707): the `resource` it was issued for is one instance endpoint, `<base>/mcp/<slug>/`;
  any other instance (or the JSON API) refuses it;
- who may grant it: the instance's owner, or a superuser (`may_authorize`);
- its scopes: `tools:read` reaches the tools that change no data, `tools:all` every tool (`scope_allows`).

Tokens are `tho_` (access) and `thr_` (refresh) followed by oauthlib's random characters; the database keeps
only their SHA-256 (django-oauth-toolkit's `token_checksum`, with hashed storage on), so a bearer that is not
of that shape is refused without a lookup, like a malformed API key.

Domain module: no DRF, no MCP SDK, no request objects.
"""

import hashlib
import re
from typing import Any

from tools_app.kernel.limits import PUBLIC_URL
from tools_app.tool_types import TOOL_TYPES

__all__ = [
    "ACCESS_TOKEN_PREFIX",
    "REFRESH_TOKEN_PREFIX",
    "SCOPE_ALL",
    "SCOPE_READ",
    "SCOPES",
    "is_access_token",
    "may_authorize",
    "public_base",
    "resource_url",
    "scope_allows",
    "slug_of_resource",
    "token_checksum",
]

SCOPE_READ = "tools:read"
SCOPE_ALL = "tools:all"
SCOPES = (SCOPE_READ, SCOPE_ALL)

ACCESS_TOKEN_PREFIX = "tho_"
REFRESH_TOKEN_PREFIX = "thr_"
TOKEN_RANDOM_LENGTH = 43
_ACCESS_TOKEN = re.compile(rf"^{ACCESS_TOKEN_PREFIX}[A-Za-z0-9]{{{TOKEN_RANDOM_LENGTH}}}$")
_RESOURCE_PATH = re.compile(r"^/mcp/(?P<slug>[-a-zA-Z0-9_]+)/?$")


def is_access_token(bearer: str) -> bool:
    """Whether `bearer` has the shape of an access token this server issues (a cheap check before any lookup)."""
    return _ACCESS_TOKEN.fullmatch(bearer) is not None


def token_checksum(token: str) -> str:
    """The SHA-256 the database keeps of a token (django-oauth-toolkit's `token_checksum`)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def public_base(scheme: str, host: str) -> str:
    """The origin clients reach toolhub at: TOOLHUB_PUBLIC_URL when set, else the request's scheme and host."""
    configured = PUBLIC_URL.get().rstrip("/")
    return configured or f"{scheme}://{host}"


def resource_url(base: str, slug: str) -> str:
    """The resource identifier (RFC 8707) of an instance: its endpoint URL, `<base>/mcp/<slug>/`."""
    return f"{base.rstrip('/')}/mcp/{slug}/"


def slug_of_resource(resource: Any, base: str) -> str | None:
    """The instance slug a resource identifier names on this server (`base`), or None when it names none."""
    if not isinstance(resource, str) or len(resource) > 2000:
        return None
    prefix = base.rstrip("/")
    if not resource.startswith(prefix + "/"):
        return None
    match = _RESOURCE_PATH.fullmatch(resource[len(prefix) :])
    return match["slug"] if match else None


def may_authorize(user: Any, owner_id: int) -> bool:
    """Only the instance's owner, or a superuser, can let a client reach an instance."""
    return bool(user is not None and user.is_active and (user.is_superuser or user.pk == owner_id))


def scope_allows(scopes: frozenset[str] | set[str], tool_type: str | None) -> bool:
    """Whether a token with `scopes` may call a tool of `tool_type`: `tools:all` any tool, `tools:read` those
    that change no data. An unknown type (no binding of that name) is left to the pipeline's TOOL_NOT_FOUND."""
    if SCOPE_ALL in scopes:
        return True
    spec = TOOL_TYPES.get(tool_type or "")
    if spec is None:
        return SCOPE_READ in scopes
    return SCOPE_READ in scopes and not spec.changes_data
